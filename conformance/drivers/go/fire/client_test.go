package fire

// The client's heartbeats, flow and close once more (the client cases check them through the broker too),
// against a fake server on a local socket that reads FMQ1 and hello, sends welcome, then does what the test
// needs: a check of the client alone, with the timing under the test's control.

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

type fakeServer struct {
	t      *testing.T
	conn   net.Conn
	frames *FrameReader
}

// dialFake starts a fake server, dials it with cfg, and has the fake welcome the client with heartbeat h.
func dialFake(t *testing.T, cfg Config, h uint64) (*Client, *fakeServer) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	accepted := make(chan *fakeServer, 1)
	go func() {
		conn, err := listener.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- &fakeServer{t: t, conn: conn, frames: NewFrameReader(DefaultMaxFrame)}
	}()
	type dialed struct {
		c   *Client
		err error
	}
	result := make(chan dialed, 1)
	go func() {
		c, err := Dial(context.Background(), "fire://guest:guest@"+listener.Addr().String()+"/", cfg)
		result <- dialed{c, err}
	}()
	s := <-accepted
	if s == nil {
		t.Fatal("no connection")
	}
	t.Cleanup(func() { s.conn.Close() })
	preamble := make([]byte, 4)
	s.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := s.conn.Read(preamble); err != nil || string(preamble) != "FMQ1" {
		t.Fatalf("the client opened with %q (%v), not FMQ1", preamble, err)
	}
	if hello := s.expect(OpHello, time.Second); hello.Header.Uint("ver") != 1 {
		t.Fatalf("hello has ver %d", hello.Header.Uint("ver"))
	}
	s.send(OpWelcome, Map{{"ver", 1}, {"server", Map{{"name", "fake"}, {"version", "0"}}}, {"heartbeat", h},
		{"max_frame", DefaultMaxFrame}, {"caps", []any{"confirms"}}})
	d := <-result
	if d.err != nil {
		t.Fatal(d.err)
	}
	t.Cleanup(d.c.Abort)
	return d.c, s
}

func (s *fakeServer) send(op byte, header Map) {
	s.t.Helper()
	frame, err := EncodeFrame(op, header, nil)
	if err == nil {
		_, err = s.conn.Write(frame)
	}
	if err != nil {
		s.t.Fatal(err)
	}
}

// next is the client's next frame within timeout; ok false when none came.
func (s *fakeServer) next(timeout time.Duration) (Frame, bool) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 4096)
	for {
		frame, ok, err := s.frames.Next()
		if err != nil {
			s.t.Fatalf("the client sent no frame: %v", err)
		}
		if ok {
			return frame, true
		}
		s.conn.SetReadDeadline(deadline)
		n, err := s.conn.Read(buf)
		var timedOut net.Error
		if errors.As(err, &timedOut) && timedOut.Timeout() || errors.Is(err, io.EOF) {
			return Frame{}, false // none in time, or the client has ended its side
		}
		if err != nil {
			s.t.Fatalf("reading the client: %v", err)
		}
		s.frames.Push(buf[:n])
	}
}

func (s *fakeServer) expect(op byte, timeout time.Duration) Frame {
	s.t.Helper()
	frame, ok := s.next(timeout)
	if !ok || frame.Op != op {
		s.t.Fatalf("expected op 0x%02x within %v, got %v (op 0x%02x)", op, timeout, ok, frame.Op)
	}
	return frame
}

// events gathers what OnEvent is given.
func events() (Config, chan Event) {
	ch := make(chan Event, 100)
	return Config{OnEvent: func(e Event) { ch <- e }, Heartbeat: 1}, ch
}

// "each side sends ping when it has sent nothing for h / 2 seconds. Each side considers the peer dead when
// it has received nothing for 2 × h seconds."
func TestHeartbeatsPingAnIdleServerAndDropASilentOne(t *testing.T) {
	cfg, got := events()
	start := time.Now()
	_, s := dialFake(t, cfg, 1)
	welcomed := time.Now()
	var pings []time.Duration
	for time.Since(welcomed) < 1700*time.Millisecond {
		if frame, ok := s.next(100 * time.Millisecond); ok {
			if frame.Op != OpPing {
				t.Fatalf("an idle client sent op 0x%02x", frame.Op)
			}
			pings = append(pings, time.Since(welcomed))
		}
	}
	// The first after 0.5 s of sending nothing (hello was the last), then one every 0.5 s: three by 1.7 s.
	if len(pings) < 3 || pings[0] < 350*time.Millisecond || pings[0] > 800*time.Millisecond {
		t.Fatalf("pings at %v after welcome (hello %v before it)", pings, welcomed.Sub(start))
	}
	select {
	case e := <-got:
		closed, ok := e.(*Closed)
		if !ok || closed.By != ClosedByHeartbeat {
			t.Fatalf("the event is %#v, not closed by heartbeat", e)
		}
		if after := time.Since(welcomed); after < 1900*time.Millisecond || after > 2600*time.Millisecond {
			t.Fatalf("the silent server was dropped %v after its last frame, not 2 s", after)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a server silent for 2 × h was not dropped")
	}
}

// "A peer that receives ping replies pong."; a server that only answers the client's pings is alive.
func TestAServerThatAnswersIsKeptAndItsPingsAnswered(t *testing.T) {
	cfg, got := events()
	c, s := dialFake(t, cfg, 1)
	s.send(OpPing, nil)
	s.expect(OpPong, time.Second)
	for deadline := time.Now().Add(2500 * time.Millisecond); time.Now().Before(deadline); {
		if frame, ok := s.next(100 * time.Millisecond); ok && frame.Op == OpPing {
			s.send(OpPong, nil)
		}
	}
	if !c.Connected() || len(got) > 0 {
		t.Fatalf("connected %v, events %d: a server that answers pings was dropped", c.Connected(), len(got))
	}
}

// flow: "Clients stop publishing until pause: false." Also when a resume and a new pause come in one read.
func TestPublishesWaitWhileTheServerPauses(t *testing.T) {
	cfg, got := events()
	cfg.Heartbeat = 0
	c, s := dialFake(t, cfg, 0)
	s.send(OpFlow, Map{{"pause", true}})
	if e := <-got; !isFlow(e, true) {
		t.Fatalf("the event is %#v, not flow pause", e)
	}
	published := make(chan *Confirmation, 1)
	go func() {
		confirmation, err := c.PublishConfirmed(context.Background(), Publishing{Message: Message{Key: "q", Body: []byte("held")}})
		if err != nil {
			t.Error(err)
		}
		published <- confirmation
	}()
	if frame, ok := s.next(300 * time.Millisecond); ok {
		t.Fatalf("the client sent op 0x%02x while paused", frame.Op)
	}
	resume, _ := EncodeFrame(OpFlow, Map{{"pause", false}}, nil)
	pause, _ := EncodeFrame(OpFlow, Map{{"pause", true}}, nil)
	if _, err := s.conn.Write(append(resume, pause...)); err != nil {
		t.Fatal(err)
	}
	if frame, ok := s.next(300 * time.Millisecond); ok {
		t.Fatalf("the client sent op 0x%02x between a resume and a pause that came together", frame.Op)
	}
	s.send(OpFlow, Map{{"pause", false}})
	publish := s.expect(OpPublish, time.Second)
	if publish.Header.Uint("seq") != 1 || string(publish.Payload) != "held" {
		t.Fatalf("the publish is seq %d, %q", publish.Header.Uint("seq"), publish.Payload)
	}
	s.send(OpConfirm, Map{{"upto", 1}})
	acked, err := (<-published).Wait(context.Background())
	if !acked || err != nil {
		t.Fatalf("confirmed %v, %v", acked, err)
	}
}

// close: "The receiver replies with its own close and closes the socket."
func TestAServersCloseIsAnsweredAndReported(t *testing.T) {
	cfg, got := events()
	cfg.Heartbeat = 0
	_, s := dialFake(t, cfg, 0)
	s.send(OpClose, Map{{"code", 320}, {"msg", "shutting down"}})
	if reply := s.expect(OpClose, time.Second); reply.Header.Uint("code") != 200 {
		t.Fatalf("the close reply has code %d", reply.Header.Uint("code"))
	}
	if frame, ok := s.next(500 * time.Millisecond); ok {
		t.Fatalf("the client sent op 0x%02x after its close", frame.Op)
	}
	if e := <-got; !isClosed(e, ClosedByServer, 320) {
		t.Fatalf("the event is %#v, not closed by the server with 320", e)
	}
}

func isFlow(e Event, pause bool) bool {
	flow, ok := e.(*Flow)
	return ok && flow.Pause == pause
}

func isClosed(e Event, by string, code uint64) bool {
	closed, ok := e.(*Closed)
	return ok && closed.By == by && closed.Code == code
}
