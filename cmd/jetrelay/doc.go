// Command jetrelay is a webhook and event delivery engine on NATS JetStream,
// a drop-in replacement for the Cycles events service.
//
//	jetrelay run     run the bridge and the engine (see `jetrelay run --help`)
//	jetrelay demo    a self-contained tour: embedded NATS, a throwaway Redis,
//	                 a receiver, and deliveries that succeed, retry and fail
//	jetrelay handback  rollback: with jetrelay stopped, return every delivery
//	                 it holds to dispatch:pending / dispatch:retry
//	jetrelay version print the version
package main
