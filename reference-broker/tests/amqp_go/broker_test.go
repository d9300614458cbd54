package amqpgo

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The broker: a firemq-broker process this test starts (-broker), or one that runs already (-url).
var (
	brokerPath = flag.String("broker", "", "the firemq-broker executable to start on free ports")
	brokerURL  = flag.String("url", "", "the AMQP URL of a broker that runs already (RabbitMQ too); no broker is started")
	brokerArgs stringList
)

func init() {
	flag.Var(&brokerArgs, "broker-arg", "one more argument for the broker started (repeatable), e.g. --amqp-fault=NAME")
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// How long a test waits for something the broker owes it: far beyond what any takes, so that only a broker that
// never sends it fails. Nothing is decided by a sleep.
const deadline = 10 * time.Second

var (
	amqpURL string
	runID   = fmt.Sprintf("%d", os.Getpid()) // names of this run's queues, apart from an earlier run's on a shared broker

	tallyMu        sync.Mutex
	passed, failed int
)

func TestMain(m *testing.M) {
	flag.Parse()
	var stop func()
	switch {
	case *brokerURL != "":
		amqpURL = *brokerURL
	case *brokerPath != "":
		var err error
		if amqpURL, stop, err = startBroker(*brokerPath, brokerArgs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: amqp_go.test [-test.v] -broker FIREMQ_BROKER [-broker-arg ARG]... | -url AMQP_URL")
		os.Exit(2)
	}
	code := m.Run()
	if stop != nil {
		stop()
	}
	fmt.Printf("amqp_go: %d passed, %d failed\n", passed, failed)
	os.Exit(code)
}

// startBroker starts firemq-broker with its AMQP listener on a free port (the FireMQ one too, the others off) and
// a data directory of its own, as amqp_pika_test.py does; stop ends it with SIGTERM and removes the directory.
func startBroker(path string, extra []string) (url string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "firemq-amqp-go")
	if err != nil {
		return "", nil, err
	}
	portFile := filepath.Join(dir, "ports.json")
	logPath := filepath.Join(dir, "broker.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", nil, err
	}
	args := []string{"--bind", "127.0.0.1", "--port", "0", "--tls-port", "off", "--ws-port", "off",
		"--wss-port", "off", "--amqp-port", "0", "--data-dir", filepath.Join(dir, "data"), "--port-file", portFile}
	cmd := exec.Command(path, append(args, extra...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
		os.RemoveAll(dir)
	}
	until := time.Now().Add(20 * time.Second)
	for {
		var ports map[string]int
		if data, err := os.ReadFile(portFile); err == nil && json.Unmarshal(data, &ports) == nil && ports["amqp"] != 0 {
			return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", ports["amqp"]), stop, nil
		}
		select {
		case <-exited:
		default:
			if time.Now().Before(until) {
				time.Sleep(20 * time.Millisecond)
				continue
			}
		}
		data, _ := os.ReadFile(logPath)
		stop()
		return "", nil, fmt.Errorf("the broker did not start: %s", data)
	}
}

// --- A client per test ----------------------------------------------------------------------------------------

// client is one amqp091-go connection of a test, with a tap on its socket that sees each method frame either
// way, and the test's queue names. It is closed, and its queues deleted, when the test ends.
type client struct {
	t    *testing.T
	conn *amqp.Connection
	tap  *tap
}

// begin counts the test in the closing line, whatever its verdict.
func begin(t *testing.T) {
	t.Cleanup(func() {
		tallyMu.Lock()
		defer tallyMu.Unlock()
		if t.Failed() {
			failed++
		} else {
			passed++
		}
	})
}

func dial(t *testing.T) *client {
	t.Helper()
	c := &client{t: t}
	conn, err := amqp.DialConfig(amqpURL, amqp.Config{Dial: func(network, addr string) (net.Conn, error) {
		raw, err := net.DialTimeout(network, addr, deadline)
		if err != nil {
			return nil, err
		}
		c.tap = &tap{Conn: raw}
		return c.tap, nil
	}})
	if err != nil {
		t.Fatalf("dial %s: %v", amqpURL, err)
	}
	c.conn = conn
	t.Cleanup(func() {
		// Bounded: amqp091-go's Close may wait forever on a connection the broker broke off.
		done := make(chan struct{})
		go func() { conn.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(deadline):
			t.Errorf("connection.close was not answered within %v", deadline)
			c.tap.Conn.Close()
		}
	})
	return c
}

func (c *client) channel() *amqp.Channel {
	c.t.Helper()
	ch, err := c.conn.Channel()
	if err != nil {
		c.t.Fatalf("channel.open: %v", err)
	}
	return ch
}

// name is a queue or exchange name of this test and run.
func name(t *testing.T, suffix string) string {
	return "go-" + runID + "-" + t.Name() + suffix
}

// exclusiveQueue declares a queue of this connection, deleted with it.
func exclusiveQueue(t *testing.T, ch *amqp.Channel, suffix string, args amqp.Table) string {
	t.Helper()
	q, err := ch.QueueDeclare(name(t, suffix), false, false, true, false, args)
	if err != nil {
		t.Fatalf("queue.declare %s: %v", name(t, suffix), err)
	}
	return q.Name
}

// sharedQueue declares a queue other connections may use; it is deleted when the test ends.
func sharedQueue(t *testing.T, c *client, suffix string, args amqp.Table) string {
	t.Helper()
	q, err := c.channel().QueueDeclare(name(t, suffix), false, false, false, false, args)
	if err != nil {
		t.Fatalf("queue.declare %s: %v", name(t, suffix), err)
	}
	t.Cleanup(func() {
		if ch, err := c.conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(q.Name, false, false, false)
		}
	})
	return q.Name
}

// ready is the number of messages the queue holds ready for delivery (queue.declare-ok's message_count).
func ready(t *testing.T, ch *amqp.Channel, queue string) int {
	t.Helper()
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		t.Fatalf("passive queue.declare %s: %v", queue, err)
	}
	return q.Messages
}

// publish sends a message through the default exchange and waits for its confirm on a confirm-mode channel of
// its own, so that the message is queued (and handed to any consumer that can take it) when it returns.
func publish(t *testing.T, c *client, queue string, msgs ...amqp.Publishing) {
	t.Helper()
	publishVia(t, c, "", queue, msgs...)
}

func body(s string) amqp.Publishing { return amqp.Publishing{Body: []byte(s)} }

// receive is the next delivery, which must come within the deadline.
func receive(t *testing.T, deliveries <-chan amqp.Delivery, what string) amqp.Delivery {
	t.Helper()
	select {
	case d, ok := <-deliveries:
		if !ok {
			t.Fatalf("%s: the consumer ended", what)
		}
		return d
	case <-time.After(deadline):
		t.Fatalf("%s: no delivery within %v", what, deadline)
	}
	return amqp.Delivery{}
}

func consume(t *testing.T, ch *amqp.Channel, queue, tag string, autoAck, exclusive bool,
	args amqp.Table) <-chan amqp.Delivery {
	t.Helper()
	deliveries, err := ch.Consume(queue, tag, autoAck, exclusive, false, false, args)
	if err != nil {
		t.Fatalf("basic.consume %s: %v", queue, err)
	}
	return deliveries
}

// get takes the next message with basic.get; it must be there.
func get(t *testing.T, ch *amqp.Channel, queue string, autoAck bool) amqp.Delivery {
	t.Helper()
	d, ok, err := ch.Get(queue, autoAck)
	if err != nil || !ok {
		t.Fatalf("basic.get %s: ok=%v err=%v", queue, ok, err)
	}
	return d
}

// closedWith waits for the broker's channel.close (or connection.close) of `notify` and gives its code.
func closedWith(t *testing.T, notify chan *amqp.Error, what string) int {
	t.Helper()
	select {
	case err, ok := <-notify:
		if !ok || err == nil {
			t.Fatalf("%s: closed without an error", what)
		}
		return err.Code
	case <-time.After(deadline):
		t.Fatalf("%s: not closed within %v", what, deadline)
	}
	return 0
}

// refusal runs `call` on a new channel of c, which the broker must close with channel.close: its code, once the
// connection is shown to be still open (a channel error, not a connection error).
func refusal(t *testing.T, c *client, call func(ch *amqp.Channel) error) int {
	t.Helper()
	ch := c.channel()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	err := call(ch)
	code := closedWith(t, closed, "the refused call")
	var amqpErr *amqp.Error
	if err != nil && errors.As(err, &amqpErr) && amqpErr.Code != code {
		t.Errorf("the call returned %v, the channel closed with %d", err, code)
	}
	if c.conn.IsClosed() {
		t.Fatalf("the connection was closed, not only the channel (code %d)", code)
	}
	if err := c.roundTrip(); err != nil {
		t.Fatalf("after the channel error the connection is unusable: %v", err)
	}
	return code
}

// roundTrip opens a channel and declares a queue on it: an error if the connection is gone, or does not answer
// within the deadline (amqp091-go may wait forever for a channel it opens while the connection ends).
func (c *client) roundTrip() error { return c.roundTripOn(nil) }

// roundTripOn does it on a channel that is open already (nil: a new one).
func (c *client) roundTripOn(ch *amqp.Channel) error {
	done := make(chan error, 1)
	go func() {
		var err error
		if ch == nil {
			ch, err = c.conn.Channel()
		}
		if err == nil {
			_, err = ch.QueueDeclare("", false, false, true, false, nil)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(deadline):
		return fmt.Errorf("no answer within %v", deadline)
	}
}

// --- The socket's method frames ------------------------------------------------------------------------------

// event is one method frame on the wire: fromServer says which way; code is the reply code of a close.
type event struct {
	fromServer    bool
	channel       uint16
	class, method uint16
	code          uint16
}

// tap is the connection's socket, parsing the frames each way as they pass: what the client library does not
// show (a crossing close, the broker's connection.close at login).
type tap struct {
	net.Conn
	mu      sync.Mutex
	in, out []byte
	events  []event
}

func (t *tap) Read(b []byte) (int, error) {
	n, err := t.Conn.Read(b)
	t.parse(true, b[:n])
	return n, err
}

func (t *tap) Write(b []byte) (int, error) {
	t.parse(false, b)
	return t.Conn.Write(b)
}

func (t *tap) parse(fromServer bool, data []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	buf := &t.out
	if fromServer {
		buf = &t.in
	}
	*buf = append(*buf, data...)
	if len(*buf) >= 8 && string((*buf)[:4]) == "AMQP" {
		*buf = (*buf)[8:] // the protocol header
	}
	for len(*buf) >= 7 {
		size := int(binary.BigEndian.Uint32((*buf)[3:7]))
		if len(*buf) < 8+size {
			return
		}
		frame := (*buf)[7 : 7+size]
		if (*buf)[0] == 1 && size >= 4 {
			e := event{fromServer: fromServer, channel: binary.BigEndian.Uint16((*buf)[1:3]),
				class: binary.BigEndian.Uint16(frame[0:2]), method: binary.BigEndian.Uint16(frame[2:4])}
			if (e.class == 10 && e.method == 50 || e.class == 20 && e.method == 40) && size >= 6 {
				e.code = binary.BigEndian.Uint16(frame[4:6])
			}
			t.events = append(t.events, e)
		}
		*buf = (*buf)[8+size:]
	}
}

// String lists the method frames so far, for a failure's message.
func (t *tap) String() string {
	var b strings.Builder
	for _, e := range t.snapshot() {
		way := "->"
		if e.fromServer {
			way = "<-"
		}
		fmt.Fprintf(&b, "\n  %s ch%d %d.%d", way, e.channel, e.class, e.method)
		if e.code != 0 {
			fmt.Fprintf(&b, " (%d)", e.code)
		}
	}
	return b.String()
}

func (t *tap) snapshot() []event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]event(nil), t.events...)
}

// crossings counts the channels on which the client sent channel.close before it read the broker's: both closes
// were on their way at once.
func (t *tap) crossings() int {
	sent := map[uint16]bool{}
	n := 0
	for _, e := range t.snapshot() {
		if e.class == 20 && e.method == 41 && e.fromServer {
			delete(sent, e.channel) // close-ok of a close that did not cross
		}
		if e.class != 20 || e.method != 40 {
			continue
		}
		if !e.fromServer {
			sent[e.channel] = true
		} else if sent[e.channel] {
			n++
			delete(sent, e.channel)
		}
	}
	return n
}
