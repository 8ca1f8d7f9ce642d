// Package sqsreceive adapts a message sent by jetrelay's SQS transport to a
// receive.Message. It lives apart from package receive so a receiver that
// only verifies signatures does not link the AWS SDK.
package sqsreceive

import (
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/jetrelay/jetrelay/transport/receive"
)

// Message adapts m. The identity travels as String message attributes, so
// the receive call must ask for them (MessageAttributeNames:
// []string{"All"}).
func Message(m types.Message) receive.Message {
	body := ""
	if m.Body != nil {
		body = *m.Body
	}
	attrs := make(map[string]string, len(m.MessageAttributes))
	for k, a := range m.MessageAttributes {
		if a.StringValue != nil {
			attrs[k] = *a.StringValue
		}
	}
	return receive.AttributeMessage([]byte(body), attrs)
}
