// Package groupcommit writes work that comes together in batches, the way a
// database commits a group of transactions: one durable write for many
// callers, each learning its own result, none waiting for a stream of
// others' work beyond its own batch. The engine's put-offs and the store's
// outcomes use it (issue 22).
package groupcommit
