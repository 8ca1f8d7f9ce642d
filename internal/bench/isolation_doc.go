package bench

// isolationMechanisms is the operator's explanation that ends the isolation
// document: what keeps a bad endpoint from slowing the others, and which
// settings move the bounds.
const isolationMechanisms = `
## How jetrelay keeps one bad endpoint from slowing the others

Every replica runs a pool of workers that follows demand (from
` + "`JETRELAY_MIN_WORKERS`" + ` toward ` + "`JETRELAY_WORKERS`" + `, docs/operations.md), fed by one
JetStream consumer whose ` + "`MaxAckPending`" + ` bounds the work items out at once
(being sent, or waiting in a delayed nak). A bad endpoint can hurt the others
only by taking workers or ack-pending slots away from them, or by making
them queue behind its own work; four mechanisms stop that.

- **Adaptive per-subscription in-flight limit** (bounded by
  ` + "`JETRELAY_MAX_IN_FLIGHT_PER_SUBSCRIPTION`" + `, default no bound but the
  workers; docs/operations.md explains it). Each subscription's limit on a
  replica grows while its endpoint answers fast and healthy and shrinks
  toward one send as its latency rises, it times out or it fails, so a black
  hole soon holds one worker (until the request timeout,
  ` + "`JETRELAY_HTTP_REQUEST_TIMEOUT`" + `). An endpoint answering slower than
  100 ms on average holds at most a quarter of the workers while others are
  being sent to, and never the last eighth. A further delivery to a
  subscription at its limit is not queued behind it: if the subscription
  answers fast (under 100 ms on average) the worker waits briefly for a slot,
  otherwise the delivery is put off, without using an attempt: deliveries
  turned away queue up virtually, one recent send time divided by the limit
  apart, so they come back about as fast as the endpoint can take them.
- **Circuit breaker per subscription** (` + "`JETRELAY_BREAKER_THRESHOLD`" + `,
  ` + "`JETRELAY_BREAKER_OPEN`" + `, ` + "`JETRELAY_BREAKER_MAX_OPEN`" + `). After that many
  consecutive failed attempts (no answer, 5xx, 408, 429) the subscription's
  breaker opens: its deliveries are put off until the open period ends, again
  without using attempts, so a dead endpoint costs no sends and no workers.
  Then one probe goes out; its success closes the breaker, its failure opens
  it again for twice as long (up to the cap). A delivery is held at most until
  its retry schedule would have ended plus one open period; then it is FAILED
  with the endpoint's last answer and counts toward auto-disable.
- **Waiting in JetStream** (` + "`JETRELAY_PARK_AFTER`" + `). Every put-off (an open
  breaker, a busy slow subscription; a fast one's waits are milliseconds and
  stay delayed naks up to this long) and every retry backoff longer than this
  becomes a JetStream message schedule in the dispatch stream (one per
  delivery) and its work item is acked, instead of being nak'ed with a delay:
  a delayed nak keeps holding one of the consumer's ` + "`MaxAckPending`" + ` slots for
  the whole delay, so tens of thousands of deliveries waiting for one dead
  endpoint would otherwise fill them and starve every other subscription. The
  server fires each wake-up back into the work subject when it is due.
  Deliveries of an inactive (auto-disabled) subscription are held as stored
  messages until it is re-enabled. Only retry backoffs up to this long stay
  delayed naks (and hold a slot).
- **Two lanes.** The server fires wake-ups on a 250 ms timer, so put-offs
  come back in bursts of hundreds, most of them only to be put off again.
  Each replica hands new work to its workers before work that comes back
  (fired wake-ups, redeliveries), which keeps every fourth pick of each
  worker, so a healthy delivery waits for a free worker, not for the burst.
  The timeline above shows the rate of work coming back next to the healthy
  p99 of each period.

What remains shared is the machine: every work item a bad endpoint gets
costs a fetch, Redis reads, a record write and a schedule (the writes of
put-offs that come together batched: one script call and one burst of
publishes per batch), and the bridge moves every queued delivery out of
Redis. Intake holds (next) keep most of a bad endpoint's deliveries from
becoming work items at all. The table above shows what the rest costs the
healthy subscriptions here.

### Waiting at intake

A work item costs about half a delivery before anything can be decided about
it: the bridge's move and publish, JetStream storing it, the engine's fetch,
reads and ack, then its wake-up or held copy stored again. Holding a dead
endpoint's backlog in JetStream therefore still took half the machine from
everyone else (the backlog section below measured 0.41 to 0.56 of a
healthy subscription's rate beside one before intake holds). So the waiting starts earlier:

- When a replica holds a never-sent delivery for an open breaker, or writes a
  busy put-off for a subscription whose sends have hung at its limit with no
  answer for 200 ms (and four times its known latency: a slow endpoint that
  answers is not stalled), it writes the subscription's **intake hold**
  (` + "`" + `jetrelay:intake:holds` + "`" + `): its reason, until when (the breaker's next
  probe, or the put-off's wake-up), and how long a never-sent delivery of the
  subscription has until its retry schedule ends. Once per open period: a
  replica rewrites it only when less than half of it is left, and each trip
  of the breaker (a failed probe) renews it.
- While it lasts, bridges (which read the holds every 25 ms) leave that
  subscription's never-sent deliveries in Redis, in
  ` + "`" + `jetrelay:intake:parked:<subscription>` + "`" + `, instead of publishing them. Each
  record gets the wait note the engine's put-offs write
  (` + "`" + `"jetrelay_waiting":"breaker_open"` + "`" + ` or ` + "`" + `subscription_busy` + "`" + `, and
  ` + "`" + `next_retry_at` + "`" + ` = the end of its schedule), in the same script and only if
  the record is unchanged. A parked delivery costs its share of a move and one
  script call: no work item, no fetch, no wake-up.
- A bridge publishes it into JetStream, with its note taken off and marked
  as work that comes back (the engine takes new work first), when the
  first of these comes: a send to the subscription
  succeeds (a replica clears the hold; from the next second on, its parked
  deliveries go out, a thousand a second); the end of its own retry schedule (its last-chance
  send, so a dead endpoint is still failed and auto-disabled on the
  reference's timeline); or the hold lapsing. Once a hold is past its end,
  bridges publish one parked delivery per second as a probe (the engine
  sends it through the half-open breaker, or holds it again, which renews
  the hold); past its end plus its grace (the longest a send may take plus
  one hold period) with no renewal (the endpoint is back, or the replicas
  that held it are gone) the hold is dropped and everything goes out.
- Deliveries already sent once (retries keep their own wake-ups), those of
  ordered subscriptions (their line keeps their order) and those the bridges
  moved before the hold was written (a breaker's threshold of failures, or
  the 200 ms a hang takes to count) go through JetStream as before.
  ` + "`" + `jetrelay deliveries inspect` + "`" + ` shows a parked delivery as ` + "`" + `parked` + "`" + `, with the
  hold; ` + "`" + `jetrelay_bridge_parked_total` + "`" + ` and ` + "`" + `jetrelay_bridge_unparked_total` + "`" + `
  count them. ` + "`" + `JETRELAY_INTAKE_HOLDS=false` + "`" + ` turns holds off (replicas stop
  writing them; bridges honour those already written until they lapse).

This is the stream's back-pressure (` + "`" + `queue.Room` + "`" + `: ids wait in Redis while the
stream is full) per subscription: the ids stay where admin put them until
the subscription can take them. Put-offs of work items already in the queue
still wait in JetStream, as above.

### Reading the bad subscriptions' row

- *sends recorded* is the sum of ` + "`attempts`" + ` in the delivery records: sends
  that reached an outcome. Sends still hanging on the black hole are not in
  it yet.
- *parked put-offs* counts the put-offs that went to JetStream as a wake-up or
  a held message (from the engine's debug log, by reason: ` + "`breaker_open`" + `,
  ` + "`subscription_busy`" + `, ` + "`subscription_disabled`" + `); shorter retry waits are
  delayed naks and are not counted.
- *waiting work and heap* (healthy table) is what waits in the dispatch
  stream at the end of the phase (pending message schedules / held
  deliveries, counted by JetStream) and the Go heap in use after a GC of the
  one process that runs jetrelay and its embedded NATS server; phase B minus
  phase A, per waiting delivery, is what parked work costs in memory.
- A subscription auto-disabled after ` + "`disable_after_failures`" + ` failed
  deliveries holds its remaining deliveries parked (` + "`JETRELAY_INACTIVE_SUBSCRIPTIONS=defer`" + `)
  until an operator re-enables it or they go stale.
`
