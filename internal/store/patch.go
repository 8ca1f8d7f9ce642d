package store

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tidwall/sjson"

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

// apply writes p into a copy of raw: an existing key is rewritten in place,
// a new key is appended before the closing brace, and every other byte of
// the record is left as it was.
func (p Patch) apply(raw []byte) ([]byte, error) {
	out := append([]byte(nil), raw...)
	for _, f := range p {
		if !validFieldName(f.Name) {
			return nil, fmt.Errorf("store: patch field name %s is not a plain top-level name", strconv.Quote(f.Name))
		}
		val, err := encodeValue(f.Value)
		if err != nil {
			return nil, fmt.Errorf("store: patch field %s: %w", f.Name, err)
		}
		if out, err = sjson.SetRawBytes(out, f.Name, val); err != nil {
			return nil, fmt.Errorf("store: patch field %s: %w", f.Name, err)
		}
	}
	return out, nil
}
