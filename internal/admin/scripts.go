package admin

// The Lua scripts below are part of the storage contract
// (cycles-events-contract.md §2.1) and are copied verbatim from
// cycles-server-admin's repositories. Do not edit them: the point of this
// package is that Redis sees exactly what admin sends. SAVE_EVENT_LUA, which
// jetrelay itself runs too, has its one copy in internal/store
// (store.SaveEventLua).

// SaveWebhookLua is admin WebhookRepository's SAVE_WEBHOOK_LUA.
// KEYS = [webhook:<id>, webhooks:<tenantId>, webhooks:_all]; ARGV = [json, id].
const SaveWebhookLua = `redis.call('SET', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[2])
return 1
`

// DeleteWebhookLua is admin WebhookRepository's DELETE_WEBHOOK_LUA.
// KEYS as SaveWebhookLua; ARGV = [id]. Admin deletes webhook:secret:<id>
// separately afterwards.
const DeleteWebhookLua = `local data = redis.call('GET', KEYS[1])
if not data then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1])
return 1
`

// ReleaseLockLua is admin's RELEASE_LOCK_LUA for replay:lock:<id>.
// KEYS = [replay:lock:<id>]; ARGV = [replayId].
const ReleaseLockLua = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
else
  return 0
end
`

// CasSetAndIndexLua is admin's CAS_SET_AND_INDEX_LUA (category-boundary
// reconciler). KEYS = [webhook:<id>, webhooks:__system__];
// ARGV = [oldJson, newJson, "1"|"0", id].
const CasSetAndIndexLua = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  if ARGV[3] == '1' then redis.call('SADD', KEYS[2], ARGV[4]) end
  return 1
else
  return 0
end
`

// CascadeSetOutboxLua is admin's CASCADE_SET_OUTBOX_LUA (tenant close).
// KEYS = [webhook:<id>, <outboxItemKey>, <outboxKey>];
// ARGV = [oldJson, newJson, itemJson, itemId].
const CascadeSetOutboxLua = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[4])
return 1
`

// SaveDeliveryLua is admin WebhookDeliveryRepository's SAVE_DELIVERY_LUA
// (replay path; admin LPUSHes dispatch:pending separately afterwards).
// KEYS = [delivery:<id>, deliveries:<subId>];
// ARGV = [json, attempted_at epoch millis, id, ttl seconds].
const SaveDeliveryLua = `redis.call('SET', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1
`

// SaveAndEnqueueOnceLua is admin WebhookDeliveryRepository's
// SAVE_AND_ENQUEUE_ONCE_LUA (live dispatch): a no-op returning 0 when the
// delivery already exists. KEYS = [delivery:<id>, deliveries:<subId>,
// dispatch:pending]; ARGV as SaveDeliveryLua.
const SaveAndEnqueueOnceLua = `if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('LPUSH', KEYS[3], ARGV[3])
return 1
`
