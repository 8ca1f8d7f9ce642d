// Package natsserver owns jetrelay's embedded NATS JetStream server: the one
// `jetrelay run` starts when NATS_URL is unset, and the one tests run in
// process. By default it opens no TCP listener at all, so it never collides
// with a NATS already running on the machine.
package natsserver
