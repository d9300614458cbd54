package main

// Typed JSON (vectors/README.md): how the driver protocol writes MessagePack values that plain JSON cannot
// tell apart ({"$bin": "00ff"}, {"$int": "18446744073709551615"}, {"$float64": 2.0}, {"$float32": 0.5}, ...),
// to and from the values of package fire, which keep those types too.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"firemq.example/godriver/fire"
)

// maxSafeInt is 2^53 - 1: the ints a JSON number holds exactly; others are {"$int": "..."}.
const maxSafeInt = 1<<53 - 1

// toTypedJSON is a decoded MessagePack value as a value encoding/json writes as typed JSON.
func toTypedJSON(v any) any {
	switch x := v.(type) {
	case nil, bool, string:
		return x
	case int64:
		if x < -maxSafeInt || x > maxSafeInt {
			return tag("$int", strconv.FormatInt(x, 10))
		}
		return x
	case uint64:
		if x > maxSafeInt {
			return tag("$int", strconv.FormatUint(x, 10))
		}
		return x
	case float32:
		// "the float32 value, written as the shortest representation of the double it equals"
		return tag("$float32", floatJSON(float64(x)))
	case float64:
		return tag("$float64", floatJSON(x))
	case []byte:
		return tag("$bin", hex.EncodeToString(x))
	case fire.Ext:
		return tag("$ext", []any{x.Type, hex.EncodeToString(x.Data)})
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = toTypedJSON(item)
		}
		return out
	case fire.Map:
		return mapJSON(x)
	}
	return fmt.Sprintf("(%T)", v) // no decoded value has another type
}

// mapJSON: "map whose keys are all str and none starts with `$`": a JSON object; any other map is
// {"$map": [[key, value], ...]}, "in encoded order".
func mapJSON(m fire.Map) any {
	plain := true
	for _, item := range m {
		key, isStr := item.Key.(string)
		plain = plain && isStr && !strings.HasPrefix(key, "$")
	}
	if plain {
		return orderedObject(m)
	}
	pairs := make([]any, len(m))
	for i, item := range m {
		pairs[i] = []any{toTypedJSON(item.Key), toTypedJSON(item.Value)}
	}
	return tag("$map", pairs)
}

func tag(name string, value any) map[string]any {
	return map[string]any{name: value}
}

// floatJSON is a float as a JSON number that reads back as a float (2.0, never 2), or "NaN", "Infinity",
// "-Infinity", which JSON has no number for.
func floatJSON(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	text := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(text, ".e") {
		text += ".0"
	}
	return json.RawMessage(text)
}

// orderedObject writes a str-keyed map as a JSON object in its encoded order (encoding/json would sort a Go
// map's keys; the order does not matter to a JSON object, but keeps the transcripts readable).
type orderedObject fire.Map

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, item := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		key, err := json.Marshal(item.Key)
		if err != nil {
			return nil, err
		}
		value, err := json.Marshal(toTypedJSON(item.Value))
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteByte(':')
		b.Write(value)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// fromTypedJSON is typed JSON, as encoding/json decoded it with UseNumber, as a value for the MessagePack
// writer.
func fromTypedJSON(j any) (any, error) {
	switch x := j.(type) {
	case nil, bool, string:
		return x, nil
	case json.Number:
		return number(x)
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			var err error
			if out[i], err = fromTypedJSON(item); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		// "A JSON object with exactly one key starting with `$` is always one of the tags above."
		if len(x) == 1 {
			for key, arg := range x {
				if strings.HasPrefix(key, "$") {
					return fromTag(key, arg)
				}
			}
		}
		keys := make([]string, 0, len(x))
		for key := range x {
			keys = append(keys, key)
		}
		sort.Strings(keys) // a JSON object has no order to keep
		m := make(fire.Map, len(keys))
		for i, key := range keys {
			value, err := fromTypedJSON(x[key])
			if err != nil {
				return nil, err
			}
			m[i] = fire.MapItem{Key: key, Value: value}
		}
		return m, nil
	}
	return nil, fmt.Errorf("not typed JSON: %v", j)
}

// number is a JSON number: an int ("A bare JSON number with a fraction or exponent never appears" in typed
// JSON, but a float is read as a float64 all the same).
func number(n json.Number) (any, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, nil
	}
	if u, err := strconv.ParseUint(string(n), 10, 64); err == nil {
		return u, nil
	}
	return strconv.ParseFloat(string(n), 64)
}

func fromTag(name string, arg any) (any, error) {
	switch name {
	case "$int":
		text, _ := arg.(string)
		return number(json.Number(text))
	case "$float32":
		f, err := floatArg(arg)
		return float32(f), err
	case "$float64":
		return floatArg(arg)
	case "$bin":
		text, _ := arg.(string)
		b, err := hex.DecodeString(text)
		if b == nil {
			b = []byte{}
		}
		return b, err
	case "$ext":
		pair, _ := arg.([]any)
		if len(pair) != 2 {
			return nil, fmt.Errorf("$ext takes [type, hex]")
		}
		typeNumber, _ := pair[0].(json.Number)
		t, err := number(typeNumber)
		text, _ := pair[1].(string)
		data, hexErr := hex.DecodeString(text)
		typ, isInt := t.(int64)
		if err != nil || hexErr != nil || !isInt || typ < math.MinInt8 || typ > math.MaxInt8 {
			return nil, fmt.Errorf("$ext takes [type, hex], not %v", arg)
		}
		return fire.Ext{Type: int8(typ), Data: data}, nil
	case "$map":
		pairs, _ := arg.([]any)
		m := make(fire.Map, 0, len(pairs))
		for _, p := range pairs {
			pair, _ := p.([]any)
			if len(pair) != 2 {
				return nil, fmt.Errorf("$map takes [[key, value], ...]")
			}
			key, err := fromTypedJSON(pair[0])
			if err != nil {
				return nil, err
			}
			value, err := fromTypedJSON(pair[1])
			if err != nil {
				return nil, err
			}
			m = append(m, fire.MapItem{Key: key, Value: value})
		}
		return m, nil
	}
	return nil, fmt.Errorf("%s is not a typed-JSON tag", name)
}

// floatArg: a number, or "NaN", "Infinity", "-Infinity".
func floatArg(arg any) (float64, error) {
	switch x := arg.(type) {
	case json.Number:
		return strconv.ParseFloat(string(x), 64)
	case string:
		switch x {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
	}
	return 0, fmt.Errorf("not a float: %v", arg)
}
