package store

import (
	"sync"

	"github.com/jetrelay/jetrelay/proto"
)

// maxCachedSubscriptions bounds subCache. Past it the cache starts over: a
// miss costs one parse, so a deployment with more subscriptions busy at
// once than this only loses the saving, never correctness.
const maxCachedSubscriptions = 4096

// subCache keeps the parsed form of the subscription records read last, by
// key, together with the exact bytes it was parsed from. A record is parsed
// again as soon as its bytes differ, so the cache can never serve a stale
// subscription; it only saves re-parsing identical bytes, which is what
// every delivery to a busy subscription reads. The *proto.Subscription it
// returns is shared and must not be modified.
type subCache struct {
	mu sync.Mutex
	m  map[string]cachedSub
}

type cachedSub struct {
	raw string
	sub *proto.Subscription
}

func newSubCache() *subCache { return &subCache{m: make(map[string]cachedSub)} }

// parse returns proto.ParseSubscription(raw), from the cache when key was
// last seen with these very bytes.
func (c *subCache) parse(key string, raw []byte) (*proto.Subscription, error) {
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && e.raw == string(raw) {
		return e.sub, nil
	}
	sub, err := proto.ParseSubscription(raw)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) >= maxCachedSubscriptions {
		clear(c.m)
	}
	c.m[key] = cachedSub{raw: string(raw), sub: sub}
	c.mu.Unlock()
	return sub, nil
}
