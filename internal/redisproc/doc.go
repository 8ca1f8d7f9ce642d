// Package redisproc runs a real redis-server as a child process on a free
// loopback port: for tests, for `jetrelay demo`, and for failure tests that
// kill and restart Redis under load. It owns the process, its working
// directory (AOF/RDB files) and its log; nothing else in jetrelay starts Redis.
package redisproc
