// Package retention trims the Cycles event and delivery indexes
// (events:{tenant}, events:_all, deliveries:{subscription}) the way the
// reference events service's RetentionCleanupService does: once at start-up
// and then every interval. Records expire by their own TTL; only the index
// ZSETs need trimming, and without it they grow forever.
package retention
