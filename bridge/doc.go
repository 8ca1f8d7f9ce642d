// Package bridge moves delivery ids from Redis into JetStream without ever
// losing one. Producers (cycles-server-admin, cycles-server) LPUSH ids onto
// dispatch:pending; the bridge moves them atomically into its own
// processing list, publishes each with Nats-Msg-Id = delivery id, and removes
// it from the processing list only after JetStream's PubAck. A bridge killed
// at any instant leaves its in-flight ids in that list; it republishes them
// when it starts again (JetStream's dedupe window absorbs the ones it had
// already stored), and a live bridge adopts the list of an instance whose
// heartbeat has expired. An id pushed again on purpose after its message
// was consumed (a delivery reset to PENDING) is absorbed by that window too,
// so the bridge checks such duplicates and republishes them under a derived
// msg id while the delivery record still asks for delivery. It also
// promotes due ids from a legacy dispatch:retry ZSET left by the reference
// service, so switching over loses nothing, and once at start-up moves
// whatever an older jetrelay parked in jetrelay:deferred into
// dispatch:pending (retries and put-offs now wait in JetStream). When the
// queue config sets MaxMsgs or MaxBytes, the bridge publishes no more than
// the stream has room for (queue.Room) and keeps the rest in Redis: the
// stream itself has no limits, which would evict waiting work.
//
// It needs Redis 6.2 or later (LMOVE, BLMOVE) on a single node or behind
// Sentinel: the keys are the reference service's names, and on Redis Cluster
// dispatch:pending and a processing list would live in different slots.
//
// Run returns within about BlockTimeout of its context ending: go-redis
// cannot interrupt a blocked BLMOVE.
package bridge
