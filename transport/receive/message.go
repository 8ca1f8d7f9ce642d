package receive

import "strings"

// Message is a delivery that did not come over HTTP: its exact body and a
// lookup of its identity headers (NATS headers, SQS message attributes).
type Message struct {
	Body   []byte
	Header func(name string) string
}

// NATSMessage adapts a message published by jetrelay's NATS transport:
// NATSMessage(m.Data, m.Header) for a *nats.Msg, NATSMessage(m.Data(),
// m.Headers()) for a JetStream message (nats.Header is a
// map[string][]string, so no conversion is needed and this package does not
// link nats.go). Header names are matched exactly first (the sink writes them
// as the webhook does), then without regard to case.
func NATSMessage(data []byte, header map[string][]string) Message {
	return Message{Body: data, Header: func(name string) string {
		if v := header[name]; len(v) > 0 && v[0] != "" {
			return v[0]
		}
		for k, v := range header {
			if strings.EqualFold(k, name) && len(v) > 0 {
				return v[0]
			}
		}
		return ""
	}}
}

// AttributeMessage adapts a message whose identity headers arrive as a flat
// name → value map, such as the String message attributes jetrelay's SQS
// transport sets (package sqsreceive converts an SQS types.Message). Names
// are matched exactly.
func AttributeMessage(body []byte, attributes map[string]string) Message {
	return Message{Body: body, Header: func(name string) string { return attributes[name] }}
}

// VerifyMessage checks a message's signature and event id, and returns its
// Identity: the error is ErrNoSignature, ErrBadSignature (ErrReplay among
// them) or ErrNoEventID. Either scheme verifies it (VerifyIdentity).
// A message that fails should be dropped (acked, deleted) and logged, not
// retried: a redelivery will not make it valid.
func (v *Verifier) VerifyMessage(m Message) (Identity, error) {
	id := IdentityFrom(m.Header)
	if err := v.VerifyIdentity(m.Body, id); err != nil {
		return id, err
	}
	if !ValidEventID(id.EventID) {
		return id, ErrNoEventID
	}
	return id, nil
}
