package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
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
func encodeValue(v any) ([]byte, error) { return appendValue(nil, v) }

// appendValue appends encodeValue(v) to b.
func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return proto.AppendJSONString(b, v), nil
	case proto.DeliveryStatus:
		return proto.AppendJSONString(b, string(v)), nil
	case proto.SubscriptionStatus:
		return proto.AppendJSONString(b, string(v)), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case time.Time:
		b = append(b, '"')
		b = proto.AppendInstant(b, v)
		return append(b, '"'), nil
	default:
		return b, fmt.Errorf("unsupported value type %T", v)
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
	// Each distinct name's encoded value, in first-appearance order; enc
	// holds the values back to back.
	type slot struct {
		name       string
		start, end int
		seen       bool
	}
	slots := make([]slot, 0, len(p))
	enc := make([]byte, 0, 32*len(p))
	for _, f := range p {
		if !validFieldName(f.Name) {
			return nil, fmt.Errorf("store: patch field name %s is not a plain top-level name", strconv.Quote(f.Name))
		}
		start := len(enc)
		var err error
		if enc, err = appendValue(enc, f.Value); err != nil {
			return nil, fmt.Errorf("store: patch field %s: %w", f.Name, err)
		}
		i := slices.IndexFunc(slots, func(s slot) bool { return s.name == f.Name })
		if i < 0 {
			slots = append(slots, slot{name: f.Name})
			i = len(slots) - 1
		}
		slots[i].start, slots[i].end = start, len(enc)
	}
	root := gjson.ParseBytes(raw)
	if !root.IsObject() {
		return nil, errors.New("store: patch target is not a JSON object")
	}
	out := make([]byte, 0, len(raw)+len(enc)+16*len(slots))
	last, keys := 0, 0
	root.ForEach(func(k, v gjson.Result) bool {
		keys++
		for i := range slots {
			if slots[i].name == k.Str {
				out = append(out, raw[last:v.Index]...)
				out = append(out, enc[slots[i].start:slots[i].end]...)
				last = v.Index + len(v.Raw)
				slots[i].seen = true
				break
			}
		}
		return true
	})
	end := bytes.LastIndexByte(raw, '}')
	if end < last {
		return nil, errors.New("store: patch target is not a complete JSON object")
	}
	out = append(out, raw[last:end]...)
	for _, s := range slots {
		if s.seen {
			continue
		}
		if keys > 0 {
			out = append(out, ',')
		}
		keys++
		out = append(out, '"')
		out = append(out, s.name...)
		out = append(out, '"', ':')
		out = append(out, enc[s.start:s.end]...)
	}
	return append(out, raw[end:]...), nil
}
