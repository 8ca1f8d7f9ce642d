// Package store owns the Cycles Redis keyspace of the webhook plane and is
// the only way the engine talks to Redis: key names, reading delivery,
// event, subscription and secret records, lossless compare-and-set patches of
// delivery and subscription records, saving events with the reference's
// SAVE_EVENT_LUA, and quarantining work that cannot be processed.
//
// Records written by admin and by older services stay the source of truth:
// updates rewrite only the named top-level fields of the stored JSON, so
// unknown fields, key order and number formats survive, and every write is
// atomic against concurrent replicas and admin's own writes.
package store
