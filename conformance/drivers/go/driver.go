// The Go example driver for client certification (docs/client-certification.md): it reads the harness's
// commands as JSON lines on stdin, performs each through a client library (here package fire, a small
// FireMQ client; in your SDK, your public API), and writes replies and events as JSON lines on stdout. Copy
// it, replace package fire with your SDK, keep the JSON.
//
//	firemq-conform --driver build/conformance/drivers/go/firemq-go-driver
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"firemq.example/godriver/fire"
)

const protocolVersion = 2 // the driver protocol this driver speaks (2: publish_batch)

// How long one command may take: the harness has its own deadline per case; this only stops a driver waiting
// forever.
const commandTimeout = 20 * time.Second

// When stdin ends the driver closes its connection and exits; the harness allows 3 s for all of it.
const closeAtEndTimeout = 2 * time.Second

// command is one line from the harness, numbers kept as json.Number.
type command map[string]any

func (c command) str(key string) string {
	s, _ := c[key].(string)
	return s
}

func (c command) flag(key string) bool {
	b, _ := c[key].(bool)
	return b
}

func (c command) uint(key string, otherwise uint64) uint64 {
	n, ok := c[key].(json.Number)
	if !ok {
		return otherwise
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		return otherwise
	}
	return u
}

// mapArg is a typed-JSON map of the command (props, headers, args, header) as a fire.Map.
func (c command) mapArg(key string) (fire.Map, error) {
	if c[key] == nil {
		return fire.Map{}, nil
	}
	v, err := fromTypedJSON(c[key])
	if err != nil {
		return nil, err
	}
	m, ok := v.(fire.Map)
	if !ok {
		return nil, fmt.Errorf("%s must be a typed-JSON map", key)
	}
	return m, nil
}

type reply map[string]any

// out writes one JSON line at a time: replies from the main goroutine, events from the client's.
var out struct {
	sync.Mutex
	w *bufio.Writer
}

func writeLine(line any) {
	var b bytes.Buffer
	encoder := json.NewEncoder(&b)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(line); err != nil { // Encode ends the line with '\n'
		fmt.Fprintf(os.Stderr, "cannot write %v: %v\n", line, err)
		return
	}
	out.Lock()
	defer out.Unlock()
	out.w.Write(b.Bytes())
	out.w.Flush()
}

// reportEvent: what the SDK reports to the application, in the driver protocol's words.
func reportEvent(e fire.Event) {
	switch e := e.(type) {
	case *fire.Delivered:
		line := deliveryJSON(e.Delivery)
		line["event"], line["subscription"] = "delivered", e.Sub
		writeLine(line)
	case *fire.Returned:
		writeLine(reply{"event": "returned", "code": e.Code, "msg": e.Msg, "exchange": e.Exchange, "key": e.Key,
			"body": string(e.Body)})
	case *fire.Closed:
		writeLine(reply{"event": "closed", "by": e.By, "code": e.Code, "msg": e.Msg})
	case *fire.ErrorEvent:
		writeLine(reply{"event": "error", "code": e.Code, "msg": e.Msg, "fatal": e.Fatal})
	case *fire.Flow:
		writeLine(reply{"event": "flow", "pause": e.Pause})
	case *fire.Cancelled:
		writeLine(reply{"event": "cancelled", "subscription": e.Sub, "code": e.Code, "msg": e.Msg})
	}
}

func deliveryJSON(d fire.Delivery) reply {
	return reply{"delivery_tag": d.Tag, "redelivered": d.Redelivered, "exchange": d.Exchange, "key": d.Key,
		"props": mapJSON(d.Props), "headers": mapJSON(d.Headers), "body": string(d.Body)}
}

var client *fire.Client

func connected() (*fire.Client, error) {
	if client == nil || !client.Connected() {
		return nil, errors.New("not connected")
	}
	return client, nil
}

// tlsConfig trusts the CAs of a PEM file (the harness's throwaway CA) instead of the system's, and still
// checks the certificate and the host name.
func tlsConfig(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	return &tls.Config{RootCAs: pool}, nil
}

func perform(ctx context.Context, c command) (reply, error) {
	switch c.str("cmd") {
	case "parse_url":
		u, err := fire.ParseURL(c.str("url"))
		if err != nil {
			return nil, err
		}
		return reply{"url": reply{"scheme": u.Scheme, "tls": u.TLS, "websocket": u.WebSocket, "host": u.Host,
			"port": u.Port, "user": u.User, "password": u.Password, "vhost": u.Vhost, "path": u.Path}}, nil
	case "decode_frame":
		return decodeFrames(c)
	case "encode_frame":
		return encodeFrame(c)
	case "connect":
		if client != nil {
			client.Abort()
		}
		tc, err := tlsConfig(c.str("ca_file"))
		if err != nil {
			return nil, err
		}
		client, err = fire.Dial(ctx, c.str("url"), fire.Config{
			Heartbeat: c.uint("heartbeat", 0), TLS: tc, OnEvent: reportEvent,
			Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
		})
		if err != nil {
			return nil, err
		}
		w := client.Welcome()
		return reply{"server": reply{"name": w.ServerName, "version": w.ServerVersion}, "heartbeat": w.Heartbeat,
			"max_frame": w.MaxFrame, "caps": w.Caps}, nil
	case "declare_queue":
		cl, err := connected()
		if err != nil {
			return nil, err
		}
		args, err := c.mapArg("args")
		if err != nil {
			return nil, err
		}
		q, err := cl.DeclareQueue(ctx, c.str("name"), fire.QueueOptions{Durable: c.flag("durable"),
			Exclusive: c.flag("exclusive"), AutoDelete: c.flag("auto_delete"), Passive: c.flag("passive"), Args: args})
		if err != nil {
			return nil, err
		}
		return reply{"name": q.Name, "messages": q.Messages, "consumers": q.Consumers}, nil
	case "bind":
		cl, err := connected()
		if err != nil {
			return nil, err
		}
		args, err := c.mapArg("args")
		if err != nil {
			return nil, err
		}
		return reply{}, cl.Bind(ctx, c.str("exchange"), c.str("queue"), c.str("key"), args)
	case "publish":
		return publish(ctx, c)
	case "publish_batch":
		return publishBatch(ctx, c)
	case "subscribe":
		cl, err := connected()
		if err != nil {
			return nil, err
		}
		sub, err := cl.Subscribe(ctx, c.str("queue"), fire.SubscribeOptions{Credit: c.uint("credit", 100), NoAck: c.flag("no_ack")})
		if err != nil {
			return nil, err
		}
		return reply{"subscription": sub}, nil
	case "ack":
		cl, err := connected()
		if err != nil {
			return nil, err
		}
		return reply{}, cl.Ack(c.uint("delivery_tag", 0), c.flag("multiple"))
	case "nack":
		cl, err := connected()
		if err != nil {
			return nil, err
		}
		requeue, given := c["requeue"].(bool)
		return reply{}, cl.Nack(c.uint("delivery_tag", 0), c.flag("multiple"), requeue || !given)
	case "get":
		cl, err := connected()
		if err != nil {
			return nil, err
		}
		got, err := cl.Get(ctx, c.str("queue"), c.flag("no_ack"))
		if err != nil {
			return nil, err
		}
		if got == nil {
			return reply{"empty": true}, nil
		}
		r := deliveryJSON(got.Delivery)
		r["empty"], r["remaining"] = false, got.Remaining
		return r, nil
	case "close":
		cl, err := connected()
		if err != nil {
			return nil, err
		}
		return reply{}, cl.Close(ctx)
	}
	return nil, fmt.Errorf("unknown command %q", c.str("cmd"))
}

func publish(ctx context.Context, c command) (reply, error) {
	cl, err := connected()
	if err != nil {
		return nil, err
	}
	p, err := publishingOf(c)
	if err != nil {
		return nil, err
	}
	if !c.flag("confirm") {
		return reply{}, cl.Publish(ctx, p)
	}
	confirmation, err := cl.PublishConfirmed(ctx, p)
	if err != nil {
		return nil, err
	}
	acked, err := confirmation.Wait(ctx)
	if err != nil {
		return nil, err
	}
	return reply{"confirmed": acked}, nil
}

// publishingOf: the message of a publish command (or of one of publish_batch's messages).
func publishingOf(c command) (fire.Publishing, error) {
	props, err := c.mapArg("props")
	if err != nil {
		return fire.Publishing{}, err
	}
	headers, err := c.mapArg("headers")
	if err != nil {
		return fire.Publishing{}, err
	}
	return fire.Publishing{
		Message: fire.Message{Exchange: c.str("exchange"), Key: c.str("key"), Body: []byte(c.str("body")),
			Props: props, Headers: headers},
		Mandatory: c.flag("mandatory"), Persistent: c.flag("persistent"),
	}, nil
}

// publishBatch (driver protocol 2): every message published with a confirm before any outcome is awaited, so
// that several are in flight and one upto, or a nack among them, settles them. The outcomes in order.
func publishBatch(ctx context.Context, c command) (reply, error) {
	cl, err := connected()
	if err != nil {
		return nil, err
	}
	messages, _ := c["messages"].([]any)
	var confirmations []*fire.Confirmation
	for _, m := range messages {
		fields, _ := m.(map[string]any)
		p, err := publishingOf(command(fields))
		if err != nil {
			return nil, err
		}
		confirmation, err := cl.PublishConfirmed(ctx, p)
		if err != nil {
			return nil, err
		}
		confirmations = append(confirmations, confirmation)
	}
	confirmed := []any{}
	for _, confirmation := range confirmations {
		acked, err := confirmation.Wait(ctx)
		if err != nil {
			return nil, err
		}
		confirmed = append(confirmed, acked)
	}
	return reply{"confirmed": confirmed}, nil
}

// decodeFrames: the bytes through the codec, as the client reads a server's frames: cut into frames
// (stream) or taken as one WebSocket message (message), each header held to its op. A refusal is the
// FrameError's code.
func decodeFrames(c command) (reply, error) {
	b, err := hex.DecodeString(c.str("bytes"))
	if err != nil {
		return nil, err
	}
	maxFrame := int(c.uint("max_frame", fire.DefaultMaxFrame))
	var frames []fire.Frame
	if c.str("framing") == "message" {
		frame, err := fire.DecodeMessage(b, maxFrame)
		if err != nil {
			return nil, err
		}
		frames = append(frames, frame)
	} else {
		reader := fire.NewFrameReader(maxFrame)
		reader.Push(b)
		for {
			frame, ok, err := reader.Next()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			frames = append(frames, frame)
		}
		if c.flag("end_of_stream") {
			if err := reader.Finish(); err != nil {
				return nil, err
			}
		}
	}
	list := make([]reply, len(frames))
	for i, f := range frames {
		if err := fire.CheckHeader(f.Op, f.Header); err != nil {
			return nil, err
		}
		list[i] = reply{"op": f.Op, "header": mapJSON(f.Header), "payload": hex.EncodeToString(f.Payload)}
	}
	return reply{"frames": list}, nil
}

// encodeFrame: a header given in typed JSON, held to its op as the decoder would hold it, then encoded.
func encodeFrame(c command) (reply, error) {
	op := byte(c.uint("op", 0))
	header, err := c.mapArg("header")
	if err != nil {
		return nil, err
	}
	if !header.StrKeys() {
		return nil, &fire.FrameError{Code: 502, Msg: "a header's keys must all be str"}
	}
	if err := fire.CheckHeader(op, header); err != nil {
		return nil, err
	}
	payload, err := hex.DecodeString(c.str("payload"))
	if err != nil {
		return nil, err
	}
	frame, err := fire.EncodeFrame(op, header, payload)
	if err != nil {
		return nil, err
	}
	if c.str("framing") == "message" {
		frame = frame[4:] // a WebSocket message: the frame without its len
	}
	return reply{"bytes": hex.EncodeToString(frame)}, nil
}

// replyTo is one command line's reply line: {"id", "ok": true, ...results} or {"id", "ok": false, "error"}.
func replyTo(line []byte) reply {
	var c command
	decoder := json.NewDecoder(bytes.NewReader(line))
	decoder.UseNumber() // ints stay exact, and 2.0 is not 2
	if err := decoder.Decode(&c); err != nil {
		return reply{"id": 0, "ok": false, "error": reply{"msg": "not JSON: " + string(line)}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	r, err := perform(ctx, c)
	if err != nil {
		return reply{"id": c["id"], "ok": false, "error": errorJSON(err)}
	}
	r["id"], r["ok"] = c["id"], true
	return r
}

func errorJSON(err error) reply {
	var server *fire.ServerError
	var frame *fire.FrameError
	switch {
	case errors.As(err, &server):
		return reply{"code": server.Code, "msg": server.Msg}
	case errors.As(err, &frame):
		return reply{"code": frame.Code, "msg": frame.Msg, "fatal": frame.Fatal()}
	}
	return reply{"msg": err.Error()}
}

// One command at a time, in order; events are written whenever they happen, between and during commands.
func main() {
	out.w = bufio.NewWriter(os.Stdout)
	// "transports": what the harness runs the client cases over (fire alone when a driver names none).
	writeLine(reply{
		"event":      "ready",
		"protocol":   protocolVersion,
		"client":     reply{"name": "firemq-example-go", "version": "0.1.0"},
		"transports": []string{"fire", "fires", "ws", "wss"},
	})
	input := bufio.NewScanner(os.Stdin)
	input.Buffer(make([]byte, 64*1024), 64*1024*1024) // a decode_frame line holds up to a 16 MiB frame in hex
	for input.Scan() {
		if line := bytes.TrimSpace(input.Bytes()); len(line) > 0 {
			writeLine(replyTo(line))
		}
	}
	if err := input.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "reading stdin: %v\n", err)
	}
	// stdin closed: the case is over. Close the connection if there still is one, then exit with 0.
	if client != nil && client.Connected() {
		ctx, cancel := context.WithTimeout(context.Background(), closeAtEndTimeout)
		if err := client.Close(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "close at the end: %v\n", err)
		}
		cancel()
	}
	os.Exit(0)
}
