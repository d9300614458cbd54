// Package fire is a small FireMQ client for Go over fire://, fires://, ws:// and wss://, written for the
// example driver (../driver.go): the protocol's client side in full, short enough to read in one sitting. The
// rules a client owes the server are quoted from the spec (spec/firemq-protocol-v1.txt) beside the code
// that keeps them.
//
// A Client has three goroutines of its own: the reader cuts the server's bytes into frames and handles each
// (pings are answered, replies reach their request at once); the dispatcher hands events (deliveries,
// returns, flow, a server's close, ...) and publish confirmations to the application, one at a time and in
// the order the server sent them; the heartbeat goroutine pings an idle server and drops a silent one.
//
//	c, err := fire.Dial(ctx, "fire://guest:guest@localhost:5673/", fire.Config{OnEvent: handle})
//	q, err := c.DeclareQueue(ctx, "orders", fire.QueueOptions{Durable: true})
//	confirm, err := c.PublishConfirmed(ctx, fire.Publishing{Key: "orders", Body: []byte("hi")})
//	acked, err := confirm.Wait(ctx)
//	sub, err := c.Subscribe(ctx, "orders", fire.SubscribeOptions{Credit: 100})
//	err = c.Close(ctx)
package fire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Config is how Dial connects.
type Config struct {
	// Heartbeat is the heartbeat interval asked for, in seconds; 0 disables heartbeats. The server's welcome
	// says the negotiated one.
	Heartbeat uint64
	// TLS configures fires:// and wss://: RootCAs to trust a private CA, say. nil is Go's defaults.
	TLS *tls.Config
	// OnEvent receives what the server sends that is no reply: *Delivered, *Returned, *Closed, *ErrorEvent,
	// *Flow, *Cancelled. It is called on one goroutine, in the server's order; a delivery counts as processed
	// (for credit) once it returns. It must not wait on a Confirmation, which is settled on the same goroutine.
	OnEvent func(Event)
	// Logf, when set, is told what the client ignores or refuses of the server (a reply no request awaits,
	// an unknown op, a frame that breaks the protocol).
	Logf func(format string, args ...any)
}

// Welcome is the server's welcome (spec "welcome").
type Welcome struct {
	ServerName    string
	ServerVersion string
	ConnID        string
	Heartbeat     uint64 // negotiated, in seconds
	MaxFrame      uint64 // the largest frame the server accepts
	Caps          []string
}

// Message is what publish sends and what return, deliver and get_ok bring back.
type Message struct {
	Exchange string
	Key      string
	Body     []byte
	Props    Map // spec "Message properties": content_type, message_id, ...
	Headers  Map // application headers, any MessagePack values
}

// Publishing is a message to publish.
type Publishing struct {
	Message
	Mandatory  bool // "Return the message with `return` when no queue receives it."
	Persistent bool
}

// Delivery is a message a subscription or get brought, with its delivery tag for Ack and Nack.
type Delivery struct {
	Message
	Tag         uint64
	Redelivered bool
}

// Event is what OnEvent receives.
type Event interface{ event() }

// Delivered: a subscription's message.
type Delivered struct {
	Sub uint64
	Delivery
}

// Returned: a mandatory publish that no queue received (code 312, no-route).
type Returned struct {
	Code uint64
	Msg  string
	Message
}

// Ways a connection can end without the application asking (Closed.By).
const (
	ClosedByServer    = "server"    // the server's close
	ClosedBySocket    = "socket"    // the connection just ended
	ClosedByHeartbeat = "heartbeat" // the server sent nothing for 2 × h and was dropped
)

// Closed: the connection ended without the application asking.
type Closed struct {
	By   string
	Code uint64
	Msg  string
}

// ErrorEvent: an error from the server not tied to a request.
type ErrorEvent struct {
	Code  uint64
	Msg   string
	Fatal bool
}

// Flow: the server paused (a memory or disk alarm) or resumed publishing.
type Flow struct{ Pause bool }

// Cancelled: the server ended a subscription, for example because its queue was deleted.
type Cancelled struct {
	Sub  uint64
	Code uint64
	Msg  string
}

func (*Delivered) event()  {}
func (*Returned) event()   {}
func (*Closed) event()     {}
func (*ErrorEvent) event() {}
func (*Flow) event()       {}
func (*Cancelled) event()  {}

// ServerError is an error reply of the server: the request failed with this code (spec "Replies / error").
type ServerError struct {
	Code  uint64
	Msg   string
	Fatal bool
}

func (e *ServerError) Error() string { return fmt.Sprintf("the server refused: %d %s", e.Code, e.Msg) }

func serverError(h Map) *ServerError {
	return &ServerError{Code: h.Uint("code"), Msg: h.Str("msg"), Fatal: h.Bool("fatal")}
}

// ErrClosed: the connection is closed, or closing.
var ErrClosed = errors.New("fire: the connection is closed")

// Confirmation is the server's answer to a confirmed publish: "The server confirms every publish with a
// non-zero seq exactly once."
type Confirmation struct {
	Seq   uint64
	done  chan struct{}
	acked bool
	err   error
}

// Done is closed once the server answered, or the connection ended first.
func (c *Confirmation) Done() <-chan struct{} { return c.done }

// Wait returns true when the server confirmed the message, false when it nacked it ("The message was not
// enqueued in every queue that should have received it").
func (c *Confirmation) Wait(ctx context.Context) (bool, error) {
	select {
	case <-c.done:
		return c.acked, c.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (c *Confirmation) settle(acked bool, err error) {
	c.acked, c.err = acked, err
	close(c.done)
}

type subscription struct {
	credit    uint64 // the credit granted at subscribe: the application's buffer size
	processed uint64 // deliveries processed since credit was last topped up
}

// Client is one FireMQ connection: "One connection is one session. There are no channels." Its methods are
// safe for concurrent use.
type Client struct {
	cfg     Config
	link    link
	welcome Welcome
	events  *dispatcher
	done    chan struct{} // closed once the socket is gone

	// sendMu puts one frame at a time on the wire, and guards the state a frame's sending depends on.
	sendMu    sync.Mutex
	maxFrame  int           // the largest frame the server accepts: 65 536 until welcome says
	nextSeq   uint64        // the next confirmed publish's seq
	resumed   chan struct{} // non-nil while the server's flow says pause; closed when it resumes
	closeSent bool          // our close (or our reply to the server's) is out: nothing but pong follows it

	// mu guards what replies and deliveries settle.
	mu         sync.Mutex
	nextRid    uint64
	replies    map[uint64]chan Frame // rid to the request awaiting its reply
	confirms   map[uint64]*Confirmation
	nextSub    uint64
	subs       map[uint64]*subscription
	handshake  chan Frame    // hello's reply, welcome or error, while it is awaited
	closeReply chan struct{} // closed when the server's close answers ours
	endReason  string

	ended        atomic.Bool  // this side ended the connection (the close exchange), or it is gone
	serverDead   atomic.Bool  // the heartbeat dropped the server
	lastSent     atomic.Int64 // UnixNano of the last frame sent
	lastReceived atomic.Int64 // UnixNano of the last bytes received
}

// Dial connects to a fire://, fires://, ws:// or wss:// URL: the transport, then hello, then the server's
// welcome (spec "Connection lifecycle"). A refused login is a *ServerError (403).
func Dial(ctx context.Context, rawURL string, cfg Config) (*Client, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	l, err := openLink(ctx, u, cfg.TLS)
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg: cfg, link: l, events: newDispatcher(), done: make(chan struct{}), maxFrame: MaxFrameBeforeWelcome,
		nextSeq: 1, replies: map[uint64]chan Frame{}, confirms: map[uint64]*Confirmation{},
		subs: map[uint64]*subscription{}, handshake: make(chan Frame, 1),
		endReason: "the connection ended without close",
	}
	handshake := c.handshake // the reader sets c.handshake to nil once it has handed the reply over
	c.lastReceived.Store(time.Now().UnixNano())
	go c.events.run()
	go c.readLoop()

	err = c.sendFrame(OpHello, Map{
		{"ver", 1}, // "Protocol major version. Must be `1`."
		{"vhost", u.Vhost},
		{"auth", Map{{"mech", "plain"}, {"user", u.User}, {"pass", u.Password}}},
		{"heartbeat", cfg.Heartbeat},
		{"client", Map{{"name", "firemq-example-go"}, {"version", "0.1.0"}, {"lang", "go"}}},
		{"caps", []string{"confirms", "credit", "mandatory"}},
	}, nil)
	if err != nil {
		c.Abort()
		return nil, err
	}
	var reply Frame
	select {
	case reply = <-handshake:
	case <-c.done:
		select {
		case reply = <-handshake: // it came before the end (a refused login: error, then the end)
		default:
			return nil, fmt.Errorf("%w during the handshake: %s", ErrClosed, c.reason())
		}
	case <-ctx.Done():
		c.Abort()
		return nil, ctx.Err()
	}
	if reply.Op == OpError {
		// "If authentication fails, the server replies error with code 403 and fatal: true, then closes the socket."
		c.Abort()
		return nil, serverError(reply.Header)
	}
	h := reply.Header
	server := h.Map("server")
	c.welcome = Welcome{
		ServerName: server.Str("name"), ServerVersion: server.Str("version"), ConnID: h.Str("conn_id"),
		Heartbeat: h.Uint("heartbeat"), MaxFrame: h.Uint("max_frame"), Caps: h.StrList("caps"),
	}
	if c.welcome.MaxFrame == 0 {
		c.welcome.MaxFrame = DefaultMaxFrame // omitted: the default
	}
	// "After welcome, the limit is welcome.max_frame": ours to respect when sending. (A larger one than the u32
	// len allows limits nothing more.)
	limit := c.welcome.MaxFrame
	if limit > 4+math.MaxUint32 {
		limit = 4 + math.MaxUint32
	}
	c.sendMu.Lock()
	c.maxFrame = int(limit)
	c.sendMu.Unlock()
	if c.welcome.Heartbeat > 0 {
		go c.keepHeartbeats(time.Duration(c.welcome.Heartbeat) * time.Second)
	}
	return c, nil
}

// Welcome is the server's welcome.
func (c *Client) Welcome() Welcome { return c.welcome }

// Connected says whether the connection is open: not closed, not closing, not gone.
func (c *Client) Connected() bool {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return !c.closeSent && !c.ended.Load()
}

// QueueOptions are declare_queue's flags and arguments.
type QueueOptions struct {
	Durable    bool // "Survives a broker restart."
	Exclusive  bool // "Used only by this connection and deleted when it closes."
	AutoDelete bool // "Deleted when its last subscription is removed."
	Passive    bool // "Only check that it exists."
	Args       Map  // x-message-ttl, x-max-length, x-overflow, x-dead-letter-exchange, ...
}

// Queue is declare_queue's reply.
type Queue struct {
	Name      string // the server's name for a queue declared without one ("amq.gen-...")
	Messages  uint64
	Consumers uint64
}

// DeclareQueue declares a queue, or with Passive checks that it exists (404 if not).
func (c *Client) DeclareQueue(ctx context.Context, name string, o QueueOptions) (Queue, error) {
	ok, err := c.request(ctx, OpDeclareQueue, Map{
		{"name", name}, {"durable", o.Durable}, {"exclusive", o.Exclusive}, {"auto_delete", o.AutoDelete},
		{"passive", o.Passive}, {"args", o.Args},
	})
	if err != nil {
		return Queue{}, err
	}
	return Queue{Name: ok.Header.Str("name"), Messages: ok.Header.Uint("messages"), Consumers: ok.Header.Uint("consumers")}, nil
}

// Bind binds a queue to an exchange with a binding key.
func (c *Client) Bind(ctx context.Context, exchange, queue, key string, args Map) error {
	_, err := c.request(ctx, OpBind, Map{{"exchange", exchange}, {"queue", queue}, {"key", key}, {"args", args}})
	return err
}

// Publish sends a message without asking for a confirm (seq 0). It returns once the frame is written; while
// the server's flow says pause, it waits for the resume first.
func (c *Client) Publish(ctx context.Context, p Publishing) error {
	_, err := c.publish(ctx, p, false)
	return err
}

// PublishConfirmed sends a message with the next sequence number; the Confirmation says when the server has
// taken responsibility for it, or refused it.
func (c *Client) PublishConfirmed(ctx context.Context, p Publishing) (*Confirmation, error) {
	return c.publish(ctx, p, true)
}

func (c *Client) publish(ctx context.Context, p Publishing, confirm bool) (*Confirmation, error) {
	c.sendMu.Lock()
	// flow: "Clients stop publishing until pause: false." A loop, not an if: a new pause may come before this
	// goroutine runs again. The check and the write are under one lock, so no publish goes out after the
	// reader has seen a pause.
	for c.resumed != nil {
		resumed := c.resumed
		c.sendMu.Unlock()
		select {
		case <-resumed:
		case <-c.done:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.sendMu.Lock()
	}
	defer c.sendMu.Unlock()
	// "Client-assigned sequence number, starting at 1 and increasing by 1. `0` means no confirm is wanted."
	var seq uint64
	if confirm {
		seq = c.nextSeq
	}
	frame, err := EncodeFrame(OpPublish, Map{
		{"seq", seq}, {"exchange", p.Exchange}, {"key", p.Key}, {"mandatory", p.Mandatory},
		{"persistent", p.Persistent}, {"props", p.Props}, {"headers", p.Headers},
	}, p.Body)
	if err != nil {
		return nil, err
	}
	// "A message body must fit in one frame.": refused here, before it takes a sequence number.
	if err := c.checkSize(frame); err != nil {
		return nil, err
	}
	if !confirm {
		return nil, c.writeLocked(OpPublish, frame)
	}
	// Known before the frame goes out: its confirm may come before this goroutine runs again.
	confirmation := &Confirmation{Seq: seq, done: make(chan struct{})}
	c.mu.Lock()
	c.confirms[seq] = confirmation
	c.mu.Unlock()
	if err := c.writeLocked(OpPublish, frame); err != nil {
		c.mu.Lock()
		delete(c.confirms, seq)
		c.mu.Unlock()
		return nil, err
	}
	c.nextSeq++
	return confirmation, nil
}

// SubscribeOptions are subscribe's fields.
type SubscribeOptions struct {
	// Credit is "how many messages the server may send before the client grants more": the application's
	// buffer. The client tops it up by half each time half of it was processed (OnEvent returned).
	Credit    uint64
	NoAck     bool // "Messages count as acknowledged once sent."
	Exclusive bool
	Tag       string // "Consumer tag shown in the management API. Defaults to `fire-<sub>`."
	Args      Map
}

// Subscribe starts a subscription and returns its id ("Client-chosen subscription id, unique on the
// connection"), which the Delivered events name.
func (c *Client) Subscribe(ctx context.Context, queue string, o SubscribeOptions) (uint64, error) {
	c.mu.Lock()
	c.nextSub++
	sub := c.nextSub
	// Known before the request goes out: deliveries may come right behind the ok.
	c.subs[sub] = &subscription{credit: o.Credit}
	c.mu.Unlock()
	header := Map{{"sub", sub}, {"queue", queue}, {"credit", o.Credit}, {"no_ack", o.NoAck}, {"exclusive", o.Exclusive}}
	if o.Tag != "" {
		header = append(header, MapItem{"tag", o.Tag})
	}
	if _, err := c.request(ctx, OpSubscribe, append(header, MapItem{"args", o.Args})); err != nil {
		c.mu.Lock()
		delete(c.subs, sub)
		c.mu.Unlock()
		return 0, err
	}
	return sub, nil
}

// Ack acknowledges a delivery; with multiple, "every unacknowledged delivery with a tag up to and including
// tag". There is no reply: "An unknown tag produces a non-fatal error with code 406", an ErrorEvent.
func (c *Client) Ack(tag uint64, multiple bool) error {
	return c.sendFrame(OpAck, Map{{"tag", tag}, {"multiple", multiple}}, nil)
}

// Nack rejects a delivery: requeued, it is "delivered again with redelivered: true"; not requeued, it is
// dead-lettered or dropped.
func (c *Client) Nack(tag uint64, multiple, requeue bool) error {
	return c.sendFrame(OpNack, Map{{"tag", tag}, {"multiple", multiple}, {"requeue", requeue}}, nil)
}

// Got is a message get brought, with the count of those still ready in the queue.
type Got struct {
	Delivery
	Remaining uint64
}

// Get takes one message from a queue; nil when the queue is empty ("the reply is ok with empty: true").
func (c *Client) Get(ctx context.Context, queue string, noAck bool) (*Got, error) {
	reply, err := c.request(ctx, OpGet, Map{{"queue", queue}, {"no_ack", noAck}})
	if err != nil || reply.Op == OpOK {
		return nil, err
	}
	return &Got{Delivery: delivery(reply), Remaining: reply.Header.Uint("remaining")}, nil
}

// Close closes the connection: close 200, then the server's close in reply ("The receiver replies with its
// own close and closes the socket"); then the socket is ours to close.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closeReply == nil {
		c.closeReply = make(chan struct{})
	}
	answered := c.closeReply
	c.mu.Unlock()
	if err := c.sendFrame(OpClose, Map{{"code", 200}, {"msg", "bye"}}, nil); err != nil {
		return err
	}
	select {
	case <-answered:
		return nil
	case <-c.done:
		select {
		case <-answered: // the server's close came, then the end of the connection
			return nil
		default:
			return fmt.Errorf("%w before the server answered close: %s", ErrClosed, c.reason())
		}
	case <-ctx.Done():
		c.Abort()
		return ctx.Err()
	}
}

// Abort ends the connection at once, without close.
func (c *Client) Abort() {
	c.ended.Store(true)
	c.link.close()
}

// Design rules: "Requests carry a request id (rid) and get exactly one reply: ok, error, or an op-specific
// reply." Each request gets a new rid, so no two awaited replies share one.
func (c *Client) request(ctx context.Context, op byte, header Map) (Frame, error) {
	reply := make(chan Frame, 1)
	c.mu.Lock()
	c.nextRid++
	rid := c.nextRid
	c.replies[rid] = reply
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.replies, rid)
		c.mu.Unlock()
	}
	if err := c.sendFrame(op, append(Map{{"rid", rid}}, header...), nil); err != nil {
		forget()
		return Frame{}, err
	}
	var frame Frame
	select {
	case frame = <-reply:
	case <-c.done:
		select {
		case frame = <-reply: // it came before the end
		default:
			return Frame{}, fmt.Errorf("%w: %s", ErrClosed, c.reason())
		}
	case <-ctx.Done():
		forget() // a reply that still comes is for no one
		return Frame{}, ctx.Err()
	}
	if frame.Op == OpError {
		return frame, serverError(frame.Header)
	}
	return frame, nil
}

func (c *Client) sendFrame(op byte, header Map, payload []byte) error {
	frame, err := EncodeFrame(op, header, payload)
	if err != nil {
		return err
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if err := c.checkSize(frame); err != nil {
		return err
	}
	return c.writeLocked(op, frame)
}

// checkSize: "Before welcome, a frame may be at most 65 536 bytes. After welcome, the limit is
// welcome.max_frame."
func (c *Client) checkSize(frame []byte) error {
	if len(frame) > c.maxFrame {
		return fmt.Errorf("fire: the frame does not fit: %d bytes, the server's max_frame is %d", len(frame), c.maxFrame)
	}
	return nil
}

// writeLocked writes a frame, with sendMu held. Once a close is out, only a pong may follow it (the
// server's pings are answered until its close comes).
func (c *Client) writeLocked(op byte, frame []byte) error {
	if c.ended.Load() || (c.closeSent && op != OpPong) {
		return ErrClosed
	}
	if err := c.link.send(frame); err != nil {
		return err
	}
	c.lastSent.Store(time.Now().UnixNano())
	if op == OpClose {
		c.closeSent = true
	}
	return nil
}

func (c *Client) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf(format, args...)
	}
}

func (c *Client) reason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endReason
}

func (c *Client) setReason(reason string) {
	c.mu.Lock()
	c.endReason = reason
	c.mu.Unlock()
}

// readLoop is the reader goroutine: the server's bytes, cut into frames, each handled in turn, until the
// connection is gone.
func (c *Client) readLoop() {
	defer c.socketGone()
	frames := NewFrameReader(MaxFrameBeforeWelcome)
	broken := false // the server broke the framing: nothing more of it is read
	for {
		bytes, err := c.link.receive()
		if err != nil {
			if !c.ended.Load() && !broken && !c.serverDead.Load() {
				c.setReason(fmt.Sprintf("the connection ended without close: %v", err))
			}
			return
		}
		c.lastReceived.Store(time.Now().UnixNano())
		if broken || c.ended.Load() {
			continue // after the close exchange nothing more is read; the end of the socket is awaited
		}
		frames.Push(bytes)
		for !c.ended.Load() {
			frame, ok, err := frames.Next()
			if err == nil && !ok {
				break // the rest of a frame is still to come
			}
			if err == nil {
				err = CheckHeader(frame.Op, frame.Header)
			}
			var bad *FrameError
			if errors.As(err, &bad) && !bad.Fatal() {
				c.logf("ignored a frame of the server: %v", bad) // 540: an op version 1 does not define
				continue
			}
			if err != nil {
				c.protocolError(bad)
				broken = true
				break
			}
			c.handle(frame, frames)
		}
	}
}

// protocolError: the server sent bytes that are no frame of version 1, and the connection cannot go on. Our
// close says why; then our side ends, and the end of the socket is reported.
func (c *Client) protocolError(bad *FrameError) {
	c.logf("the server broke the protocol: %v", bad)
	c.setReason("the server sent a bad frame: " + bad.Msg)
	_ = c.sendFrame(OpClose, Map{{"code", bad.Code}, {"msg", bad.Msg}}, nil)
	c.link.closeWrite()
	time.AfterFunc(time.Second, c.link.close)
}

// handle is one frame from the server, its header checked. Fields are read by name: "Implementations ignore
// header keys they do not know."
func (c *Client) handle(f Frame, frames *FrameReader) {
	h := f.Header
	switch f.Op {
	case OpPing:
		_ = c.sendFrame(OpPong, nil, nil) // "A peer that receives ping replies pong."
	case OpPong:
		// it counted as received; nothing else to do
	case OpWelcome:
		// What we accept from the server is our own choice once the handshake is over: the default limit.
		frames.SetMaxFrame(DefaultMaxFrame)
		c.settleHandshake(f)
	case OpOK, OpGetOK:
		c.settleReply(f)
	case OpError:
		c.handleError(f)
	case OpClose:
		c.handleClose(h)
	case OpConfirm:
		c.handleConfirm(h)
	case OpReturn:
		c.emit(&Returned{Code: h.Uint("code"), Msg: h.Str("msg"), Message: message(f)})
	case OpDeliver:
		c.handleDeliver(f)
	case OpFlow:
		c.handleFlow(h.Bool("pause"))
	case OpCancelled:
		c.mu.Lock()
		delete(c.subs, h.Uint("sub"))
		c.mu.Unlock()
		c.emit(&Cancelled{Sub: h.Uint("sub"), Code: h.Uint("code"), Msg: h.Str("msg")})
	default:
		c.logf("ignored op 0x%02x from the server, which only clients send", f.Op)
	}
}

func (c *Client) settleHandshake(f Frame) {
	c.mu.Lock()
	handshake := c.handshake
	c.handshake = nil
	c.mu.Unlock()
	if handshake == nil {
		c.logf("ignored a second welcome")
		return
	}
	handshake <- f
}

func (c *Client) settleReply(f Frame) {
	rid := f.Header.Uint("rid")
	c.mu.Lock()
	reply, ok := c.replies[rid]
	delete(c.replies, rid)
	c.mu.Unlock()
	if !ok {
		c.logf("a reply for rid %d, which no request awaits", rid)
		return
	}
	reply <- f
}

// error: "`rid` The failed request, or absent for errors not tied to a request." hello has no rid: an error
// during the handshake is its reply.
func (c *Client) handleError(f Frame) {
	h := f.Header
	c.mu.Lock()
	_, awaited := c.replies[h.Uint("rid")]
	handshaking := c.handshake != nil
	c.mu.Unlock()
	switch {
	case h.Uint("rid") != 0 && awaited:
		c.settleReply(f)
	case handshaking:
		c.settleHandshake(f)
	default:
		c.emit(&ErrorEvent{Code: h.Uint("code"), Msg: h.Str("msg"), Fatal: h.Bool("fatal")})
		// "`fatal` true when the server closes the connection after this frame": the connection is over now,
		// not when the socket ends, and nothing more is sent on it.
		if h.Bool("fatal") {
			c.setReason(fmt.Sprintf("the server's fatal error: %d %s", h.Uint("code"), h.Str("msg")))
			c.emit(&Closed{By: ClosedByServer, Code: h.Uint("code"), Msg: h.Str("msg")})
			c.end()
		}
	}
}

// close: "The receiver replies with its own close and closes the socket."
func (c *Client) handleClose(h Map) {
	c.mu.Lock()
	answered := c.closeReply
	c.mu.Unlock()
	if answered != nil { // the answer to our close
		c.end()
		close(answered)
		return
	}
	c.setReason(fmt.Sprintf("the server closed the connection: %d %s", h.Uint("code"), h.Str("msg")))
	c.emit(&Closed{By: ClosedByServer, Code: h.Uint("code"), Msg: h.Str("msg")})
	_ = c.sendFrame(OpClose, Map{{"code", 200}, {"msg", "closing as asked"}}, nil)
	c.end()
}

// end ends our side once the close exchange is over; the socket is gone for good a moment later even if the
// server does not end its side.
func (c *Client) end() {
	c.ended.Store(true)
	c.link.closeWrite()
	time.AfterFunc(time.Second, c.link.close)
}

// confirm: {"upto": n} "confirms every outstanding publish with seq <= n"; {"seq": n, "nack": true} "rejects
// one publish". "A nack for a sequence number is always sent before any upto that covers it."
func (c *Client) handleConfirm(h Map) {
	var settled []*Confirmation
	c.mu.Lock()
	if h.Bool("nack") {
		if confirmation, ok := c.confirms[h.Uint("seq")]; ok {
			delete(c.confirms, h.Uint("seq"))
			c.mu.Unlock()
			c.events.push(func() { confirmation.settle(false, nil) })
			return
		}
	} else {
		upto := h.Uint("upto")
		for seq, confirmation := range c.confirms {
			if seq <= upto {
				settled = append(settled, confirmation)
				delete(c.confirms, seq)
			}
		}
	}
	c.mu.Unlock()
	sort.Slice(settled, func(i, j int) bool { return settled[i].Seq < settled[j].Seq })
	// Through the dispatcher, behind the events that came before: a return reaches the application before
	// its publish's confirm ("The return is sent before the publish's confirm").
	c.events.push(func() {
		for _, confirmation := range settled {
			confirmation.settle(true, nil)
		}
	})
}

// credit: "Clients usually grant their buffer size at subscribe, then top up by half that size each time
// they have processed half of it." A delivery is processed once OnEvent has returned.
func (c *Client) handleDeliver(f Frame) {
	id := f.Header.Uint("sub")
	d := &Delivered{Sub: id, Delivery: delivery(f)}
	c.events.push(func() {
		c.deliver(d)
		c.mu.Lock()
		s := c.subs[id]
		grant := uint64(0)
		if s != nil {
			half := max1(s.credit / 2)
			if s.processed++; s.processed >= half {
				s.processed, grant = 0, half
			}
		}
		c.mu.Unlock()
		if grant > 0 {
			_ = c.sendFrame(OpCredit, Map{{"sub", id}, {"credit", grant}}, nil)
		}
	})
}

func max1(n uint64) uint64 {
	if n < 1 {
		return 1
	}
	return n
}

// flow: "The server sends pause: true when a memory or disk alarm fires. Clients stop publishing until
// pause: false." publish waits on resumed.
func (c *Client) handleFlow(pause bool) {
	c.sendMu.Lock()
	if pause && c.resumed == nil {
		c.resumed = make(chan struct{})
	}
	if !pause && c.resumed != nil {
		close(c.resumed)
		c.resumed = nil
	}
	c.sendMu.Unlock()
	c.emit(&Flow{Pause: pause})
}

// Heartbeats: "each side sends ping when it has sent nothing for h / 2 seconds. Each side considers the peer
// dead when it has received nothing for 2 × h seconds."
func (c *Client) keepHeartbeats(h time.Duration) {
	timer := time.NewTimer(h / 2)
	defer timer.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-timer.C:
		}
		lastReceived := time.Unix(0, c.lastReceived.Load())
		if silent := time.Since(lastReceived); silent >= 2*h {
			// Without close: a dead server would not read it. Reported as closed by heartbeat.
			c.setReason(fmt.Sprintf("nothing from the server for %d ms: it is dead", silent.Milliseconds()))
			c.serverDead.Store(true)
			c.link.close()
			return
		}
		retry := time.Duration(0)
		if time.Since(time.Unix(0, c.lastSent.Load())) >= h/2 {
			if c.sendMu.TryLock() {
				if !c.closeSent { // close is the last frame a peer sends: no pings after it
					frame, _ := EncodeFrame(OpPing, nil, nil)
					_ = c.writeLocked(OpPing, frame)
				}
				c.sendMu.Unlock()
			} else {
				retry = 10 * time.Millisecond // a frame is being written now: look again shortly
			}
		}
		// Wake when the next ping is due or the server would be dead, whichever comes first (a frame sent or
		// received in between moves them; the wake-up then only looks again).
		next := time.Until(time.Unix(0, c.lastSent.Load()).Add(h / 2))
		if dead := time.Until(lastReceived.Add(2 * h)); dead < next {
			next = dead
		}
		if retry > 0 && retry < next {
			next = retry
		}
		timer.Reset(next + time.Millisecond)
	}
}

// socketGone: the reader goroutine is done, the connection with it. Every awaited reply and confirmation
// fails, and an end the application did not ask for is an event.
func (c *Client) socketGone() {
	c.link.close()
	wasEnded := c.ended.Swap(true)
	close(c.done) // the requests and Dial waiting see it
	c.mu.Lock()
	pending := c.confirms
	c.confirms = map[uint64]*Confirmation{}
	reason := c.endReason
	c.mu.Unlock()
	for _, confirmation := range pending {
		confirmation := confirmation
		c.events.push(func() { confirmation.settle(false, fmt.Errorf("%w: %s", ErrClosed, reason)) })
	}
	if !wasEnded {
		by := ClosedBySocket
		if c.serverDead.Load() {
			by = ClosedByHeartbeat
		}
		c.emit(&Closed{By: by, Msg: reason})
	}
	c.events.stop()
}

func (c *Client) emit(e Event) {
	c.events.push(func() { c.deliver(e) })
}

func (c *Client) deliver(e Event) {
	if c.cfg.OnEvent != nil {
		c.cfg.OnEvent(e)
	}
}

func message(f Frame) Message {
	h := f.Header
	return Message{Exchange: h.Str("exchange"), Key: h.Str("key"), Body: f.Payload, Props: h.Map("props"), Headers: h.Map("headers")}
}

func delivery(f Frame) Delivery {
	return Delivery{Message: message(f), Tag: f.Header.Uint("tag"), Redelivered: f.Header.Bool("redelivered")}
}

// dispatcher runs what the reader hands the application, one at a time, in order, on a goroutine of its own:
// a slow application never keeps the reader from answering pings. It is unbounded, but deliveries are
// bounded by the credit the application grants by processing them.
type dispatcher struct {
	mu      sync.Mutex
	wake    *sync.Cond
	queue   []func()
	stopped bool
}

func newDispatcher() *dispatcher {
	d := &dispatcher{}
	d.wake = sync.NewCond(&d.mu)
	return d
}

func (d *dispatcher) push(f func()) {
	d.mu.Lock()
	d.queue = append(d.queue, f)
	d.mu.Unlock()
	d.wake.Signal()
}

// stop lets run return once the queue is empty.
func (d *dispatcher) stop() {
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
	d.wake.Signal()
}

func (d *dispatcher) run() {
	for {
		d.mu.Lock()
		for len(d.queue) == 0 && !d.stopped {
			d.wake.Wait()
		}
		if len(d.queue) == 0 {
			d.mu.Unlock()
			return
		}
		f := d.queue[0]
		d.queue = d.queue[1:]
		d.mu.Unlock()
		f()
	}
}
