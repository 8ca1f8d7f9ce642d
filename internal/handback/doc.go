// Package handback returns every delivery jetrelay holds to the reference
// events service's Redis keys, for a rollback: ids in the bridges'
// processing lists and work items queued on the dispatch subject, held for an
// inactive subscription or put off in a message schedule go to
// dispatch:pending; a retry goes to dispatch:retry scored with the time it is
// due, which is how the reference reads them. It runs only while jetrelay is
// stopped (no replica's heartbeat is alive), hands wake-ups back before they
// fire and walks the stream until nothing of jetrelay's is left, writes each
// id to Redis before removing it from JetStream, and skips ids a reference
// key already holds, so it is safe to run again after a crash part-way.
package handback
