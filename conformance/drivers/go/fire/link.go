package fire

// How frames travel (spec "Transports"). TCP and TLS: "Client first sends the 4 ASCII bytes `FMQ1`, then
// length-prefixed frames." WebSocket: "One binary WebSocket message per frame, without the length prefix and
// without `FMQ1`." The client (client.go) sees one shape whatever the transport: it sends frames in their TCP
// form (len first) and is given bytes in the TCP framing; over WebSocket the link takes the len off each
// frame it sends and puts it back on each message it receives.

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

type link interface {
	// send writes one frame, given in its TCP form. Not safe for concurrent use: the client serialises.
	send(frame []byte) error
	// receive blocks for the next bytes from the server, in the TCP framing; an error once the connection is gone.
	receive() ([]byte, error)
	// closeWrite ends our side: FIN (after TLS's close_notify), or a WebSocket close.
	closeWrite()
	// close ends the connection at once.
	close()
}

// openLink connects to the URL's host and port over its transport. tlsConfig (fires, wss): the CAs to trust
// and the rest; nil is Go's defaults (the system's CAs). Go checks the server's certificate and its host name
// or IP address.
func openLink(ctx context.Context, u *URL, tlsConfig *tls.Config) (link, error) {
	address := net.JoinHostPort(u.Host, strconv.Itoa(u.Port))
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	if u.WebSocket {
		return openWebSocket(ctx, u, address, tlsConfig)
	}
	return openStream(ctx, u, address, tlsConfig)
}

// fire and fires: a TCP connection, in TLS for fires, that starts with FMQ1.
type streamLink struct {
	conn net.Conn
	tcp  *net.TCPConn
	buf  []byte
}

func openStream(ctx context.Context, u *URL, address string, tlsConfig *tls.Config) (link, error) {
	var conn net.Conn
	var err error
	if u.TLS {
		dialer := tls.Dialer{Config: tlsConfig} // ServerName, when unset, is the host dialled
		conn, err = dialer.DialContext(ctx, "tcp", address)
	} else {
		var dialer net.Dialer
		conn, err = dialer.DialContext(ctx, "tcp", address)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %w", address, err)
	}
	l := &streamLink{conn: conn, buf: make([]byte, 64*1024)}
	if tc, ok := conn.(*tls.Conn); ok {
		l.tcp, _ = tc.NetConn().(*net.TCPConn)
	} else {
		l.tcp, _ = conn.(*net.TCPConn)
	}
	if _, err := conn.Write([]byte("FMQ1")); err != nil {
		conn.Close()
		return nil, err
	}
	return l, nil
}

func (l *streamLink) send(frame []byte) error {
	_, err := l.conn.Write(frame)
	return err
}

func (l *streamLink) receive() ([]byte, error) {
	n, err := l.conn.Read(l.buf)
	if n > 0 {
		return l.buf[:n], nil // the next read may fail; the bytes before it count
	}
	return nil, err
}

func (l *streamLink) closeWrite() {
	if tc, ok := l.conn.(*tls.Conn); ok {
		_ = tc.CloseWrite() // close_notify; the TCP FIN follows
	}
	if l.tcp != nil {
		_ = l.tcp.CloseWrite()
	}
}

func (l *streamLink) close() { _ = l.conn.Close() }

// ws and wss, with gorilla/websocket: the upgrade on the URL's path, the vhost in the query as the URL rule
// says (and in hello too), one binary message a frame. gorilla masks the client's frames (RFC 6455 5.1),
// reassembles fragmented messages, answers WebSocket pings and closes.
type webSocketLink struct {
	conn *websocket.Conn
}

func openWebSocket(ctx context.Context, u *URL, address string, tlsConfig *tls.Config) (link, error) {
	target := u.Scheme + "://" + address + u.Path + "?vhost=" + queryEscape(u.Vhost)
	dialer := websocket.Dialer{TLSClientConfig: tlsConfig, HandshakeTimeout: 10 * time.Second}
	conn, _, err := dialer.DialContext(ctx, target, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", target, err)
	}
	conn.SetReadLimit(DefaultMaxFrame) // a frame's size is its message's + 4, so this is generous by 4 bytes
	return &webSocketLink{conn: conn}, nil
}

func (l *webSocketLink) send(frame []byte) error {
	return l.conn.WriteMessage(websocket.BinaryMessage, frame[4:]) // "without the length prefix"
}

func (l *webSocketLink) receive() ([]byte, error) {
	for {
		kind, message, err := l.conn.ReadMessage()
		if err != nil {
			return nil, err
		}
		if kind != websocket.BinaryMessage {
			continue // a text message carries no frame
		}
		bytes := make([]byte, 4+len(message))
		binary.BigEndian.PutUint32(bytes, uint32(len(message)))
		copy(bytes[4:], message)
		return bytes, nil
	}
}

func (l *webSocketLink) closeWrite() {
	deadline := time.Now().Add(time.Second)
	_ = l.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), deadline)
}

func (l *webSocketLink) close() { _ = l.conn.Close() }

// queryEscape percent-encodes all but RFC 3986's unreserved characters, '+' included: the URL rule reads a
// '+' as itself, a form decoder as a space, and "%2B" is the same to both.
func queryEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
