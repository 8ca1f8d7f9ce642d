package admin

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// object builds one JSON object in a fixed field order, the way Jackson
// writes a bean: callers decide per field whether a missing value is a
// literal null (Include.ALWAYS) or left out (NON_NULL).
type object struct {
	b []byte
	n int
}

func newObject(capacity int) *object {
	return &object{b: append(make([]byte, 0, capacity), '{')}
}

func (o *object) key(k string) {
	if o.n > 0 {
		o.b = append(o.b, ',')
	}
	o.n++
	o.b = proto.AppendJSONString(o.b, k)
	o.b = append(o.b, ':')
}

// str writes v, or null when v is empty (an always-written Java String).
func (o *object) str(k, v string) {
	o.key(k)
	if v == "" {
		o.b = append(o.b, "null"...)
		return
	}
	o.b = proto.AppendJSONString(o.b, v)
}

// optStr writes v unless it is empty (a NON_NULL Java String).
func (o *object) optStr(k, v string) {
	if v != "" {
		o.key(k)
		o.b = proto.AppendJSONString(o.b, v)
	}
}

// instant writes t in Java Instant form, or null when t is zero.
func (o *object) instant(k string, t time.Time) {
	o.key(k)
	if t.IsZero() {
		o.b = append(o.b, "null"...)
		return
	}
	o.b = append(o.b, '"')
	o.b = proto.AppendInstant(o.b, t)
	o.b = append(o.b, '"')
}

// optInstant writes *t unless t is nil.
func (o *object) optInstant(k string, t *time.Time) {
	if t != nil {
		o.instant(k, *t)
	}
}

func (o *object) int(k string, v int64) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
}

func (o *object) bool(k string, v bool) {
	o.key(k)
	o.b = strconv.AppendBool(o.b, v)
}

// strings writes a JSON array of strings; a nil slice is a literal null and
// an empty one is [], as Jackson distinguishes a null List from an empty one.
func (o *object) strings(k string, vs []string) {
	o.key(k)
	if vs == nil {
		o.b = append(o.b, "null"...)
		return
	}
	o.b = append(o.b, '[')
	for i, v := range vs {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = proto.AppendJSONString(o.b, v)
	}
	o.b = append(o.b, ']')
}

// optRaw writes an already-encoded JSON value verbatim unless it is empty.
func (o *object) optRaw(k string, v json.RawMessage) {
	if len(v) > 0 {
		o.key(k)
		o.b = append(o.b, v...)
	}
}

func (o *object) bytes() []byte { return append(o.b, '}') }
