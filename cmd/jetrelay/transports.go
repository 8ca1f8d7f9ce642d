package main

// The transports compiled into this build, besides the webhook transport
// the stack builds itself (it needs the SSRF guard). Each registers its URL
// scheme from init; a custom build adds its own plugin with one more blank
// import here or in a file of its own (docs/transports.md).
import (
	_ "github.com/jetrelay/jetrelay/transport/natsink"
	_ "github.com/jetrelay/jetrelay/transport/sqs"
)
