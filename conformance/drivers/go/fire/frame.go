package fire

// The FireMQ frame (spec "Frame format"): the bytes of one frame, a reader that cuts a TCP byte stream into
// frames, and CheckHeader, which holds a header to its op's field types. Headers are MessagePack maps
// (value.go); bodies stay raw bytes.
//
//	+-----------+--------+------------+---------------------+------------------+
//	| len : u32 | op : u8| hlen : u32 | header (hlen bytes) | payload          |
//	+-----------+--------+------------+---------------------+------------------+

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Op codes (spec "Op codes").
const (
	OpHello           byte = 0x01
	OpWelcome         byte = 0x02
	OpPing            byte = 0x03
	OpPong            byte = 0x04
	OpClose           byte = 0x05
	OpOK              byte = 0x06
	OpError           byte = 0x07
	OpFlow            byte = 0x08
	OpDeclareExchange byte = 0x10
	OpDeleteExchange  byte = 0x11
	OpDeclareQueue    byte = 0x12
	OpDeleteQueue     byte = 0x13
	OpPurgeQueue      byte = 0x14
	OpBind            byte = 0x15
	OpUnbind          byte = 0x16
	OpPublish         byte = 0x20
	OpConfirm         byte = 0x21
	OpReturn          byte = 0x22
	OpSubscribe       byte = 0x30
	OpUnsubscribe     byte = 0x31
	OpCredit          byte = 0x32
	OpDeliver         byte = 0x33
	OpCancelled       byte = 0x34
	OpAck             byte = 0x35
	OpNack            byte = 0x36
	OpGet             byte = 0x37
	OpGetOK           byte = 0x38
)

// "Before welcome, a frame may be at most 65 536 bytes. After welcome, the limit is welcome.max_frame (16 MiB
// by default)." A frame's size is 4 + len: the len field counts (vectors/README.md).
const (
	MaxFrameBeforeWelcome = 65536
	DefaultMaxFrame       = 16 * 1024 * 1024
)

// Frame is one frame: its op, its header and its payload.
type Frame struct {
	Op      byte
	Header  Map
	Payload []byte
}

// FrameError is what the codec refuses, with the spec's code: 501 frame-error, 502 syntax-error, or 540
// not-implemented, the one that is not fatal ("A server that receives an unknown op replies error with code
// 540 and keeps the connection open").
type FrameError struct {
	Code uint64
	Msg  string
}

func (e *FrameError) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Msg) }

// Fatal says whether the connection cannot go on after it.
func (e *FrameError) Fatal() bool { return e.Code != 540 }

func frameError(code uint64, format string, args ...any) *FrameError {
	return &FrameError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// carriesPayload: "Only publish, return, deliver and get_ok carry a payload."
func carriesPayload(op byte) bool {
	return op == OpPublish || op == OpReturn || op == OpDeliver || op == OpGetOK
}

// EncodeFrame is the frame in its TCP form, len first; a nil header is the empty map. "len counts every byte
// after the len field: 1 + 4 + hlen + payload length."
func EncodeFrame(op byte, header Map, payload []byte) ([]byte, error) {
	h, err := EncodeValue(header)
	if err != nil {
		return nil, err
	}
	if int64(1+4+len(h)+len(payload)) > math.MaxUint32 {
		return nil, fmt.Errorf("a frame of %d bytes is more than a u32 len can count", 4+1+4+len(h)+len(payload))
	}
	frame := make([]byte, 9, 9+len(h)+len(payload))
	binary.BigEndian.PutUint32(frame[0:], uint32(1+4+len(h)+len(payload)))
	frame[4] = op
	binary.BigEndian.PutUint32(frame[5:], uint32(len(h)))
	frame = append(frame, h...)
	return append(frame, payload...), nil
}

// FrameReader cuts a byte stream into frames. Bytes may come one at a time or many frames at once: Push adds
// what came, Next takes one whole frame at a time, so that a limit changed by one frame (welcome) holds for
// the next.
type FrameReader struct {
	maxFrame int
	buffered []byte
}

// NewFrameReader reads frames of at most maxFrame bytes (4 + len).
func NewFrameReader(maxFrame int) *FrameReader {
	return &FrameReader{maxFrame: maxFrame}
}

// SetMaxFrame changes the limit for the frames not read yet.
func (r *FrameReader) SetMaxFrame(maxFrame int) { r.maxFrame = maxFrame }

// Push adds bytes that came from the stream.
func (r *FrameReader) Push(b []byte) { r.buffered = append(r.buffered, b...) }

// Next returns the next whole frame, or ok false when more bytes are needed. On an error (a *FrameError) the
// stream cannot be read further, unless it is not Fatal: a 540 (unknown op) has consumed its frame, and the
// next one can be read.
func (r *FrameReader) Next() (frame Frame, ok bool, err error) {
	if len(r.buffered) < 4 {
		return Frame{}, false, nil
	}
	n := int64(binary.BigEndian.Uint32(r.buffered))
	// Decided from the len field alone: a peer announcing a huge frame is refused before it is read.
	if 4+n > int64(r.maxFrame) {
		return Frame{}, false, frameError(501, "a frame of %d bytes is over the limit of %d", 4+n, r.maxFrame)
	}
	if n < 5 {
		return Frame{}, false, frameError(501, "len %d is too short for op and hlen", n)
	}
	if int64(len(r.buffered)) < 4+n {
		return Frame{}, false, nil
	}
	body := r.buffered[4 : 4+n]
	r.buffered = r.buffered[4+n:]
	frame, ferr := parseFrame(body)
	return frame, ferr == nil, nilIfNone(ferr)
}

// Finish says the stream ended: bytes of a frame left over are a truncated frame ("Malformed frame").
func (r *FrameReader) Finish() error {
	if len(r.buffered) > 0 {
		return frameError(501, "the stream ended %d byte(s) into a frame", len(r.buffered))
	}
	return nil
}

// DecodeMessage reads one WebSocket binary message as one frame: "On WebSocket the frame is the same without
// len." Its size, as the limits count it, is the message's length + 4 (vectors/README.md).
func DecodeMessage(message []byte, maxFrame int) (Frame, error) {
	if len(message)+4 > maxFrame {
		return Frame{}, frameError(501, "a frame of %d bytes is over the limit of %d", len(message)+4, maxFrame)
	}
	if len(message) < 5 {
		return Frame{}, frameError(501, "a message of %d bytes is too short for op and hlen", len(message))
	}
	frame, err := parseFrame(message)
	return frame, nilIfNone(err)
}

// nilIfNone keeps a nil *FrameError from becoming a non-nil error.
func nilIfNone(err *FrameError) error {
	if err == nil {
		return nil
	}
	return err
}

// parseFrame reads op, hlen, header and payload: the frame after its len field (a WebSocket message has no
// len). An op version 1 does not define is 540, its header not looked at.
func parseFrame(b []byte) (Frame, *FrameError) {
	op := b[0]
	hlen := int64(binary.BigEndian.Uint32(b[1:5]))
	if hlen > int64(len(b)-5) {
		return Frame{}, frameError(501, "hlen %d runs past the frame", hlen)
	}
	if _, known := opFields[op]; !known {
		return Frame{Op: op}, frameError(540, "op 0x%02x is not a version 1 op", op)
	}
	payload := b[5+hlen:]
	if len(payload) > 0 && !carriesPayload(op) {
		return Frame{}, frameError(501, "op 0x%02x carries no payload", op)
	}
	header, err := decodeHeader(b[5 : 5+hlen])
	if err != nil {
		return Frame{}, err
	}
	return Frame{Op: op, Header: header, Payload: append([]byte(nil), payload...)}, nil
}

// decodeHeader: "header is a MessagePack map with string keys. hlen may be 0, meaning an empty map."
func decodeHeader(b []byte) (Map, *FrameError) {
	if len(b) == 0 {
		return Map{}, nil
	}
	v, err := DecodeValue(b) // refuses trailing bytes too: the map must fill hlen exactly
	if err != nil {
		return nil, frameError(502, "the header is no MessagePack value: %v", errors.Unwrap(err))
	}
	m, ok := v.(Map)
	if !ok {
		return nil, frameError(502, "the header is a MessagePack %T, not a map", v)
	}
	if !m.StrKeys() {
		return nil, frameError(502, "the header is a map with a key that is not a str")
	}
	return m, nil
}

// The field types of version 1's ops.
type fieldType int

const (
	tUint fieldType = iota
	tStr
	tBool
	tMap     // free-form: any keys, any values
	tStrList // [str]
	tProps   // spec "Message properties"
	tAuth    // hello.auth
	tServer  // welcome.server
)

type fields map[string]fieldType

var messageFields = fields{"exchange": tStr, "key": tStr, "props": tProps, "headers": tMap}
var bindFields = fields{"rid": tUint, "exchange": tStr, "queue": tStr, "to_exchange": tStr, "key": tStr, "args": tMap}

// Every op of version 1 with its fields (spec "Op codes" and each op's table).
var opFields = map[byte]fields{
	OpHello:   {"ver": tUint, "vhost": tStr, "auth": tAuth, "heartbeat": tUint, "client": tMap, "caps": tStrList},
	OpWelcome: {"ver": tUint, "server": tServer, "conn_id": tStr, "heartbeat": tUint, "max_frame": tUint, "caps": tStrList},
	OpPing:    {},
	OpPong:    {},
	OpClose:   {"code": tUint, "msg": tStr},
	OpOK:      {"rid": tUint, "name": tStr, "messages": tUint, "consumers": tUint, "empty": tBool},
	OpError:   {"rid": tUint, "code": tUint, "msg": tStr, "fatal": tBool},
	OpFlow:    {"pause": tBool},
	OpDeclareExchange: {"rid": tUint, "name": tStr, "type": tStr, "durable": tBool, "auto_delete": tBool,
		"internal": tBool, "passive": tBool, "args": tMap},
	OpDeleteExchange: {"rid": tUint, "name": tStr, "if_unused": tBool},
	OpDeclareQueue: {"rid": tUint, "name": tStr, "durable": tBool, "exclusive": tBool, "auto_delete": tBool,
		"passive": tBool, "args": tMap},
	OpDeleteQueue: {"rid": tUint, "name": tStr, "if_unused": tBool, "if_empty": tBool},
	OpPurgeQueue:  {"rid": tUint, "name": tStr},
	OpBind:        bindFields,
	OpUnbind:      bindFields,
	OpPublish:     with(messageFields, fields{"seq": tUint, "mandatory": tBool, "persistent": tBool}),
	OpConfirm:     {"upto": tUint, "seq": tUint, "nack": tBool, "code": tUint, "msg": tStr},
	OpReturn:      with(messageFields, fields{"seq": tUint, "code": tUint, "msg": tStr}),
	OpSubscribe: {"rid": tUint, "sub": tUint, "queue": tStr, "credit": tUint, "no_ack": tBool, "exclusive": tBool,
		"tag": tStr, "args": tMap},
	OpUnsubscribe: {"rid": tUint, "sub": tUint},
	OpCredit:      {"sub": tUint, "credit": tUint},
	OpDeliver:     with(messageFields, fields{"sub": tUint, "tag": tUint, "redelivered": tBool}),
	OpCancelled:   {"sub": tUint, "code": tUint, "msg": tStr},
	OpAck:         {"tag": tUint, "multiple": tBool},
	OpNack:        {"tag": tUint, "multiple": tBool, "requeue": tBool},
	OpGet:         {"rid": tUint, "queue": tStr, "no_ack": tBool},
	OpGetOK:       with(messageFields, fields{"rid": tUint, "tag": tUint, "redelivered": tBool, "remaining": tUint}),
}

// The maps inside a header whose keys the spec names. Message properties: "content_type str, ...".
var subFields = map[fieldType]fields{
	tProps: {"content_type": tStr, "content_encoding": tStr, "correlation_id": tStr, "reply_to": tStr,
		"expiration": tUint, "message_id": tStr, "timestamp": tUint, "type": tStr, "user_id": tStr,
		"app_id": tStr, "priority": tUint},
	tAuth:   {"mech": tStr, "user": tStr, "pass": tStr},
	tServer: {"name": tStr, "version": tStr},
}

func with(a, b fields) fields {
	out := fields{}
	for k, t := range a {
		out[k] = t
	}
	for k, t := range b {
		out[k] = t
	}
	return out
}

// CheckHeader holds a header to its op: 540 for an op version 1 does not define, 502 syntax-error ("a field
// has the wrong type") for a known field of another type, named by its path (props.expiration). Keys the op
// does not define are not looked at ("Implementations ignore header keys they do not know"); a nil reads as
// the field omitted, its zero value (docs/spec-notes.md), as the reference codec reads it. Once a header has
// passed, Map's Uint, Str, Bool and Map read its fields without failing.
func CheckHeader(op byte, header Map) error {
	f, known := opFields[op]
	if !known {
		return frameError(540, "op 0x%02x is not a version 1 op", op)
	}
	return nilIfNone(checkFields(header, f, ""))
}

func checkFields(m Map, f fields, prefix string) *FrameError {
	seen := map[string]bool{}
	for _, item := range m {
		name, _ := item.Key.(string) // non-str keys (inside props) are not fields
		t, known := f[name]
		if !known || item.Value == nil {
			continue
		}
		path := prefix + name
		// A field given twice is the reference's reading of a question the spec leaves open: 502.
		if seen[name] {
			return frameError(502, "header field %s appears twice", path)
		}
		seen[name] = true
		if err := checkField(item.Value, t, path); err != nil {
			return err
		}
	}
	return nil
}

func checkField(v any, t fieldType, path string) *FrameError {
	switch t {
	case tUint:
		if _, ok := asUint(v); !ok { // never a float, never a bool
			return frameError(502, "header field %s is not an unsigned integer", path)
		}
	case tStr:
		if _, ok := v.(string); !ok {
			return frameError(502, "header field %s is not a string", path)
		}
	case tBool:
		if _, ok := v.(bool); !ok {
			return frameError(502, "header field %s is not a boolean", path)
		}
	case tMap:
		if _, ok := v.(Map); !ok {
			return frameError(502, "header field %s is not a map", path)
		}
	case tStrList:
		items, ok := v.([]any)
		for _, item := range items {
			_, isStr := item.(string)
			ok = ok && isStr
		}
		if !ok {
			return frameError(502, "header field %s is not an array of strings", path)
		}
	default: // a map with fields of its own
		m, ok := v.(Map)
		if !ok {
			return frameError(502, "header field %s is not a map", path)
		}
		return checkFields(m, subFields[t], path+".")
	}
	return nil
}
