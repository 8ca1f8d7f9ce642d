// Package sqs is jetrelay's Amazon SQS transport for sqs:// subscription
// URLs: sqs://<queue URL host>/<account id>/<queue name>, the queue URL with
// its scheme replaced. It sends the stored event as the message body with
// aws-sdk-go-v2; identity, signature and trace context travel as string
// message attributes named like the webhook's HTTP headers. A FIFO queue
// (name ending in .fifo) gets the subscription id as message group and the
// event id as deduplication id, so a resend within SQS's five-minute window
// is dropped.
//
// Credentials come from the standard AWS chain (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE, web identity, …),
// never from a subscription URL; an endpoint override points the transport
// at an SQS-compatible server. The SDK's own retries are off: the engine
// owns retries and backoff.
//
// Importing the package registers the driver for the sqs scheme; it reads
// JETRELAY_SQS_ENDPOINT and JETRELAY_SQS_REGION from the host's settings.
package sqs
