package app

// The transports compiled into every jetrelay build: each registers its URL
// schemes from init (webhook: http and https; natsink: nats; sqs: sqs). A
// custom build adds its own plugin with one more blank import in its main
// package (docs/transports.md).
import (
	_ "github.com/jetrelay/jetrelay/transport/natsink"
	_ "github.com/jetrelay/jetrelay/transport/sqs"
	_ "github.com/jetrelay/jetrelay/transport/webhook"
)
