// Package subscriptions is `jetrelay subscriptions`: creating, reading,
// listing and pausing subscriptions for destinations admin's API refuses
// (nats://, sqs://, any compiled-in plugin's scheme), stored with admin's
// own Lua and JSON so that admin and the engine read them like any other.
package subscriptions
