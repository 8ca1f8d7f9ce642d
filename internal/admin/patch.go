package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// subscriptionFields is WebhookSubscription's declaration order, the order
// admin writes a subscription in whenever it re-serializes one (PATCH).
// always marks Include.ALWAYS fields, written as null when absent.
var subscriptionFields = [...]struct {
	name   string
	always bool
}{
	{"subscription_id", true}, {"tenant_id", true}, {"name", false}, {"description", false},
	{"url", true}, {"event_types", true}, {"event_categories", false}, {"scope_filter", false},
	{"thresholds", false}, {"headers", false}, {"status", true}, {"retry_policy", false},
	{"disable_after_failures", true}, {"consecutive_failures", true}, {"created_at", true},
	{"updated_at", false}, {"last_triggered_at", false}, {"last_success_at", false},
	{"last_failure_at", false}, {"metadata", false},
}

type member struct {
	name  string
	value json.RawMessage
}

// rewriteSubscription is admin's read-modify-write of webhook:{id}: the
// record is re-serialized in declaration order with admin's null policy and
// the values in set replace (or add) fields. Unlike admin, which drops them,
// fields it does not know are kept, after its own, so that nothing another
// writer stored is lost; the @JsonIgnore'd signing_secret is dropped as
// admin drops it.
func rewriteSubscription(raw []byte, set map[string]json.RawMessage) ([]byte, error) {
	members, err := parseObject(raw)
	if err != nil {
		return nil, fmt.Errorf("admin: malformed subscription record: %w", err)
	}
	values := make(map[string]json.RawMessage, len(members)+len(set))
	for _, m := range members {
		values[m.name] = m.value
	}
	for k, v := range set {
		values[k] = v
	}
	known := make(map[string]bool, len(subscriptionFields)+1)
	o := newObject(len(raw) + 64)
	for _, f := range subscriptionFields {
		known[f.name] = true
		v, ok := values[f.name]
		isNull := !ok || bytes.Equal(v, []byte("null"))
		switch {
		case !isNull:
			o.key(f.name)
			o.b = append(o.b, v...)
		case f.always:
			o.key(f.name)
			o.b = append(o.b, "null"...)
		}
	}
	known["signing_secret"] = true
	for _, m := range members {
		if !known[m.name] {
			known[m.name] = true // a duplicated key is written once, with its last value
			o.key(m.name)
			o.b = append(o.b, values[m.name]...)
		}
	}
	return o.bytes(), nil
}

// parseObject splits a JSON object into its members in document order,
// each value kept as compact raw JSON.
func parseObject(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, v); err != nil {
			return nil, err
		}
		members = append(members, member{name: name, value: compact.Bytes()})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if dec.InputOffset() != int64(len(bytes.TrimRight(raw, " \t\r\n"))) {
		return nil, errors.New("trailing data after the JSON object")
	}
	return members, nil
}
