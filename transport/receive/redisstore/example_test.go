package redisstore_test

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/transport/receive"
	"github.com/jetrelay/jetrelay/transport/receive/redisstore"
)

// Deduplication in Redis: SET NX with a 72-hour TTL by default.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "redis.internal:6379"})
	deduper := receive.NewDeduper(redisstore.New(client), receive.WithLease(time.Minute))
	_ = deduper
}
