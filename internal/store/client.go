package store

import "github.com/redis/go-redis/v9"

// Client is the go-redis v9 client a Store works on: a *redis.Client, a
// *redis.ClusterClient, a failover client or a ring. It is an alias of
// redis.UniversalClient, so code outside this module (an application that
// embeds the engine or the bridge) passes its go-redis client as is, and
// the packages built on the store need not import go-redis themselves.
type Client = redis.UniversalClient
