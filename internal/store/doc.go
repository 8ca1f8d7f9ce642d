// Package store owns the Redis keyspace jetrelay touches and is the only way
// the bridge, the engine and the metrics talk to Redis: key names, reading
// delivery, event, subscription and secret records, lossless compare-and-set
// patches of delivery and subscription records, saving events with the
// reference's SAVE_EVENT_LUA, quarantining work that cannot be processed,
// the dispatch lists the bridge moves ids through (its processing lists,
// heartbeats and registry, the legacy dispatch:retry promotion) and the
// backlog lengths metrics report. Every Lua script jetrelay runs lives here,
// once, one file per keyspace concept.
//
// Records written by admin and by older services stay the source of truth:
// updates rewrite only the named top-level fields of the stored JSON, so
// unknown fields, key order and number formats survive, and every write is
// atomic against concurrent replicas and admin's own writes.
package store
