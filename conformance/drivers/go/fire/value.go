package fire

// MessagePack values that keep their type, read and written with the format-level API of
// github.com/vmihailenco/msgpack/v5 (Debian's golang-github-vmihailenco-msgpack.v5-dev).
//
// Why not msgpack.Unmarshal into interface{}: it turns ext -1 into a time.Time, refuses an ext type it has no
// Go type for, and decodes every map into map[string]interface{}, so a map with an int key fails and the order
// of the entries is lost. The spec says "Decoders must decode every vector to the listed header" and
// vectors/README.md lists those cases, so this file walks the format itself, one value at a time:
//
//	MessagePack      Go value
//	nil              nil
//	bool             bool
//	int              int64 (uint64 only above math.MaxInt64)
//	float32/float64  float32 / float64 (Go keeps the two apart, and never turns 2.0 into 2)
//	str              string (bytes kept as sent, even when they are not UTF-8)
//	bin              []byte
//	ext              Ext
//	array            []any
//	map              Map: the entries in encoded order, keys of any type
//
// The reader checks every declared length against the bytes left before it allocates, bounds nesting at
// MaxNesting levels and a value at MaxItems items (docs/spec-notes.md, "Nesting depth and item count").

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Ext is a MessagePack extension value, kept as its type and raw data (type -1, the timestamp, included).
type Ext struct {
	Type int8
	Data []byte
}

// MapItem is one entry of a Map.
type MapItem struct {
	Key   any
	Value any
}

// Map is a MessagePack map as it was encoded: its entries in order, keys of any MessagePack type. Headers,
// props, headers and args all decode to a Map; Get reads one str key. The writer takes a Map or a
// map[string]any (written in sorted key order, since a Go map has none).
type Map []MapItem

// Get returns the value of the str key, and whether the map has it (the first entry, if it repeats).
func (m Map) Get(key string) (any, bool) {
	for _, item := range m {
		if k, ok := item.Key.(string); ok && k == key {
			return item.Value, true
		}
	}
	return nil, false
}

// Uint reads a uint field: 0 when absent or nil. Use it on a header CheckHeader has passed, where the field
// is known to be an unsigned integer.
func (m Map) Uint(key string) uint64 {
	v, _ := m.Get(key)
	n, _ := asUint(v)
	return n
}

// Str reads a str field: "" when absent or nil.
func (m Map) Str(key string) string {
	v, _ := m.Get(key)
	s, _ := v.(string)
	return s
}

// Bool reads a bool field: false when absent or nil.
func (m Map) Bool(key string) bool {
	v, _ := m.Get(key)
	b, _ := v.(bool)
	return b
}

// Map reads a map field: empty when absent or nil.
func (m Map) Map(key string) Map {
	v, _ := m.Get(key)
	sub, _ := v.(Map)
	return sub
}

// StrList reads a [str] field: nil when absent or nil.
func (m Map) StrList(key string) []string {
	v, _ := m.Get(key)
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, item := range items {
		if s, ok := item.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// StrKeys says whether every key is a str: a map a JSON object or a Go map[string]any can hold.
func (m Map) StrKeys() bool {
	for _, item := range m {
		if _, ok := item.Key.(string); !ok {
			return false
		}
	}
	return true
}

// asUint is a decoded int as a uint64, if it is one and not negative.
func asUint(v any) (uint64, bool) {
	switch n := v.(type) {
	case int64:
		return uint64(n), n >= 0
	case uint64:
		return n, true
	}
	return 0, false
}

// MaxNesting is how deep values may nest: "Application headers nested deeper than 64 levels are 502"
// (vectors/README.md), the header map being level 1.
const MaxNesting = 64

// MaxItems bounds the values in one header, as the reference decoder does: a 16 MiB frame of one-byte items
// would otherwise become millions of Go values.
const MaxItems = 65536

// errMsgpack wraps what the reader refuses; the frame codec turns it into 502 syntax-error.
var errMsgpack = errors.New("not MessagePack")

// DecodeValue reads the one MessagePack value that fills b exactly.
func DecodeValue(b []byte) (any, error) {
	r := bytes.NewReader(b) // an io.ByteScanner: the decoder reads it directly, so r.Len() is what is left
	vr := valueReader{d: msgpack.NewDecoder(r), r: r}
	v, err := vr.value(1)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errMsgpack, err)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d byte(s) after the value", errMsgpack, r.Len())
	}
	return v, nil
}

type valueReader struct {
	d     *msgpack.Decoder
	r     *bytes.Reader
	items int
}

func (vr *valueReader) value(depth int) (any, error) {
	if vr.items++; vr.items > MaxItems {
		return nil, fmt.Errorf("more than %d values", MaxItems)
	}
	d := vr.d
	c, err := d.PeekCode()
	if err != nil {
		return nil, err
	}
	switch {
	case c == msgpcode.Nil:
		return nil, d.DecodeNil()
	case c == msgpcode.False || c == msgpcode.True:
		return d.DecodeBool()
	case c == msgpcode.Uint64:
		n, err := d.DecodeUint64()
		if err != nil || n > math.MaxInt64 {
			return n, err
		}
		return int64(n), nil
	case msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Uint32) ||
		(c >= msgpcode.Int8 && c <= msgpcode.Int64):
		return d.DecodeInt64()
	case c == msgpcode.Float:
		return d.DecodeFloat32()
	case c == msgpcode.Double:
		return d.DecodeFloat64()
	case msgpcode.IsString(c):
		b, err := vr.sized(d.DecodeBytesLen) // str and bin share their length formats
		return string(b), err
	case msgpcode.IsBin(c):
		return vr.sized(d.DecodeBytesLen)
	case msgpcode.IsExt(c):
		var ext Ext
		data, err := vr.sized(func() (int, error) {
			t, n, err := d.DecodeExtHeader()
			ext.Type = t
			return n, err
		})
		ext.Data = data
		return ext, err
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := vr.count(d.DecodeArrayLen, depth, 1)
		if err != nil {
			return nil, err
		}
		items := make([]any, n)
		for i := range items {
			if items[i], err = vr.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return items, nil
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := vr.count(d.DecodeMapLen, depth, 2)
		if err != nil {
			return nil, err
		}
		m := make(Map, n)
		for i := range m {
			if m[i].Key, err = vr.value(depth + 1); err != nil {
				return nil, err
			}
			if m[i].Value, err = vr.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return m, nil
	}
	return nil, fmt.Errorf("byte 0x%02x starts no MessagePack value", c)
}

// sized reads a length with readLen, then that many bytes, once it knows they are there.
func (vr *valueReader) sized(readLen func() (int, error)) ([]byte, error) {
	n, err := readLen()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > vr.r.Len() {
		return nil, fmt.Errorf("a length of %d with %d byte(s) left", n, vr.r.Len())
	}
	b := make([]byte, n)
	return b, vr.d.ReadFull(b)
}

// count reads an array's or map's count: each of its values takes one byte at least, so a count beyond the
// bytes left is refused before anything is allocated for it.
func (vr *valueReader) count(readLen func() (int, error), depth, perItem int) (int, error) {
	if depth > MaxNesting {
		return 0, fmt.Errorf("nested deeper than %d levels", MaxNesting)
	}
	n, err := readLen()
	if err != nil {
		return 0, err
	}
	if n < 0 || n > vr.r.Len()/perItem {
		return 0, fmt.Errorf("a count of %d with %d byte(s) left", n, vr.r.Len())
	}
	return n, nil
}

// EncodeValue writes v as MessagePack, each int in its smallest format. It takes the values DecodeValue
// returns, and for convenience any Go int or uint type, map[string]any and []string.
func EncodeValue(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeValue(msgpack.NewEncoder(&buf), v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeValue(e *msgpack.Encoder, v any) error {
	switch x := v.(type) {
	case nil:
		return e.EncodeNil()
	case bool:
		return e.EncodeBool(x)
	case int:
		return e.EncodeInt(int64(x))
	case int8:
		return e.EncodeInt(int64(x))
	case int16:
		return e.EncodeInt(int64(x))
	case int32:
		return e.EncodeInt(int64(x))
	case int64:
		return e.EncodeInt(x)
	case uint:
		return e.EncodeUint(uint64(x))
	case uint8:
		return e.EncodeUint(uint64(x))
	case uint16:
		return e.EncodeUint(uint64(x))
	case uint32:
		return e.EncodeUint(uint64(x))
	case uint64:
		return e.EncodeUint(x)
	case float32:
		return e.EncodeFloat32(x)
	case float64:
		return e.EncodeFloat64(x)
	case string:
		return e.EncodeString(x)
	case []byte:
		if x == nil {
			x = []byte{} // a bin, even when empty (EncodeBytes writes a nil slice as nil)
		}
		return e.EncodeBytes(x)
	case Ext:
		if err := e.EncodeExtHeader(x.Type, len(x.Data)); err != nil {
			return err
		}
		_, err := e.Writer().Write(x.Data)
		return err
	case []any:
		if err := e.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, item := range x {
			if err := writeValue(e, item); err != nil {
				return err
			}
		}
		return nil
	case []string:
		if err := e.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, s := range x {
			if err := e.EncodeString(s); err != nil {
				return err
			}
		}
		return nil
	case Map:
		if err := e.EncodeMapLen(len(x)); err != nil {
			return err
		}
		for _, item := range x {
			if err := writeValue(e, item.Key); err != nil {
				return err
			}
			if err := writeValue(e, item.Value); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		return writeValue(e, sortedMap(x))
	}
	return fmt.Errorf("%T is not a MessagePack value", v)
}

// sortedMap is a Go map as a Map, in key order, so that the same map always encodes to the same bytes.
func sortedMap(m map[string]any) Map {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(Map, len(keys))
	for i, k := range keys {
		out[i] = MapItem{Key: k, Value: m[k]}
	}
	return out
}
