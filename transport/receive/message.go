package receive

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go"
)

// Message is a delivery that did not come over HTTP: its exact body and a
// lookup of its identity headers (NATS headers, SQS message attributes).
type Message struct {
	Body   []byte
	Header func(name string) string
}

// NATSMessage adapts a message published by jetrelay's NATS transport:
// NATSMessage(m.Data, m.Header) for a *nats.Msg, NATSMessage(m.Data(),
// m.Headers()) for a JetStream message. Header names are matched exactly
// first (the sink writes them as the webhook does), then without regard to
// case.
func NATSMessage(data []byte, header nats.Header) Message {
	return Message{Body: data, Header: func(name string) string {
		if v := header.Get(name); v != "" {
			return v
		}
		for k, v := range header {
			if strings.EqualFold(k, name) && len(v) > 0 {
				return v[0]
			}
		}
		return ""
	}}
}

// SQSMessage adapts a message sent by jetrelay's SQS transport. The identity
// travels as String message attributes, so the receive call must ask for
// them (MessageAttributeNames: []string{"All"}).
func SQSMessage(m types.Message) Message {
	body := ""
	if m.Body != nil {
		body = *m.Body
	}
	return Message{Body: []byte(body), Header: func(name string) string {
		if a, ok := m.MessageAttributes[name]; ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}}
}

// VerifyMessage checks a message's signature and event id, and returns its
// Identity: the error is ErrNoSignature, ErrBadSignature or ErrNoEventID.
// A message that fails should be dropped (acked, deleted) and logged, not
// retried: a redelivery will not make it valid.
func (v *Verifier) VerifyMessage(m Message) (Identity, error) {
	id := IdentityFrom(m.Header)
	if err := v.Verify(m.Body, id.Signature); err != nil {
		return id, err
	}
	if !ValidEventID(id.EventID) {
		return id, ErrNoEventID
	}
	return id, nil
}
