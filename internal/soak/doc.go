// Package soak is jetrelay's fault soak: real processes (jetrelay replicas
// and a bridge on a three-node nats-server cluster, one jetrelay on its
// embedded server, redis-server with an fsync-always append-only file)
// under a steady load written as admin writes it, receivers that flap, time
// out and black-hole, and faults drawn from a seed. At the end every
// delivery is checked (terminal, backed by a signed receipt or its own
// send, in one place only) and the findings come back as a Report, which
// WriteMarkdown renders as docs/reliability.md.
package soak
