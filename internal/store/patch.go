package store

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/jetrelay/jetrelay/proto"
)

// Field sets one top-level JSON field of a record.
//
// Value may be nil (written as JSON null), a string, int, int64, bool,
// time.Time (written in Java Instant form), proto.DeliveryStatus or
// proto.SubscriptionStatus. Floats are refused: Java and Go print them
// differently, and no field the engine writes is fractional.
type Field struct {
	Name  string
	Value any
}

// Patch is the set of fields one update writes, applied in order.
type Patch []Field

// encodeValue renders v as the JSON Jackson would write for it.
func encodeValue(v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return []byte("null"), nil
	case string:
		return proto.AppendJSONString(nil, v), nil
	case proto.DeliveryStatus:
		return proto.AppendJSONString(nil, string(v)), nil
	case proto.SubscriptionStatus:
		return proto.AppendJSONString(nil, string(v)), nil
	case int:
		return strconv.AppendInt(nil, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(nil, v, 10), nil
	case bool:
		return strconv.AppendBool(nil, v), nil
	case time.Time:
		b := append(make([]byte, 0, 32), '"')
		b = proto.AppendInstant(b, v)
		return append(b, '"'), nil
	default:
		return nil, fmt.Errorf("unsupported value type %T", v)
	}
}

// validFieldName accepts the snake_case names records use. Anything else
// could be read as sjson path syntax (dots, wildcards, modifiers) and patch
// a nested or unintended field.
func validFieldName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// apply writes p into a copy of raw: an existing key is rewritten in place
// (every occurrence, should the record repeat it), a new key is appended
// before the closing brace, and every other byte of the record is left as it
// was. When p names a field twice, the last value wins. It reads raw once,
// however many fields p has.
func (p Patch) apply(raw []byte) ([]byte, error) {
	names := make(map[string]int, len(p)) // field name → its value in vals
	vals := make([][]byte, 0, len(p))
	order := make([]string, 0, len(p)) // first-appearance order, for appending
	for _, f := range p {
		if !validFieldName(f.Name) {
			return nil, fmt.Errorf("store: patch field name %s is not a plain top-level name", strconv.Quote(f.Name))
		}
		val, err := encodeValue(f.Value)
		if err != nil {
			return nil, fmt.Errorf("store: patch field %s: %w", f.Name, err)
		}
		if i, ok := names[f.Name]; ok {
			vals[i] = val
			continue
		}
		names[f.Name] = len(vals)
		vals = append(vals, val)
		order = append(order, f.Name)
	}
	root := gjson.ParseBytes(raw)
	if !root.IsObject() {
		return nil, errors.New("store: patch target is not a JSON object")
	}
	out := make([]byte, 0, len(raw)+64*len(vals))
	seen := make([]bool, len(vals))
	last, keys := 0, 0
	root.ForEach(func(k, v gjson.Result) bool {
		keys++
		i, ok := names[k.Str]
		if !ok {
			return true
		}
		out = append(out, raw[last:v.Index]...)
		out = append(out, vals[i]...)
		last = v.Index + len(v.Raw)
		seen[i] = true
		return true
	})
	end := bytes.LastIndexByte(raw, '}')
	if end < last {
		return nil, errors.New("store: patch target is not a complete JSON object")
	}
	out = append(out, raw[last:end]...)
	for _, name := range order {
		i := names[name]
		if seen[i] {
			continue
		}
		if keys > 0 {
			out = append(out, ',')
		}
		keys++
		out = append(out, '"')
		out = append(out, name...)
		out = append(out, '"', ':')
		out = append(out, vals[i]...)
	}
	return append(out, raw[end:]...), nil
}
