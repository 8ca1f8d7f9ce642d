package config

import (
	"strconv"
	"strings"
)

// RedisAddress names the Redis server the settings point at, for logs and
// operator output: host:port and the database number when not 0, never the
// password. An unparsable REDIS_URL is described as such (RedisOptions
// reports the error).
func (c *Config) RedisAddress() string {
	o, err := c.RedisOptions()
	if err != nil {
		return "unparsable REDIS_URL"
	}
	addr := o.Addr
	if c.RedisURL != "" && strings.HasPrefix(c.RedisURL, "unix:") {
		addr = "unix:" + o.Addr
	}
	if o.DB != 0 {
		addr += " db " + strconv.Itoa(o.DB)
	}
	return addr
}

// NATSMode says where JetStream lives: the NATS_URL servers (credentials
// hidden) or an embedded server with its storage directory and listener.
func (c *Config) NATSMode() string {
	if c.NATSURL == "" {
		listen := "in-process only"
		if c.NATSListen != "" {
			listen = "listening on " + c.NATSListen
		}
		return "embedded JetStream (data dir " + c.DataDir + ", " + listen + ")"
	}
	var servers []string
	for _, s := range strings.Split(c.NATSURL, ",") {
		servers = append(servers, redactUserinfo(strings.TrimSpace(s)))
	}
	return "external NATS " + strings.Join(servers, ",")
}

// redactUserinfo drops user and password from a server URL such as
// nats://user:pass@host:4222; a bare host:port is returned as is.
func redactUserinfo(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	return scheme + "://" + rest
}
