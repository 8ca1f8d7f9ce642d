// Package pgproc runs a private PostgreSQL server as a child process for
// tests and benchmarks: initdb on a fresh temporary data folder, then the
// postgres server itself (not pg_ctl, which detaches it) as a direct child on
// a free loopback port, with a death signal so it dies with a test binary
// killed hard; Stop sends SIGINT (fast shutdown). It never
// touches a system database. Debian keeps the server binaries off PATH, so
// they are found through `pg_config --bindir`; initdb refuses to run as root,
// so a root caller runs them as the postgres user (runuser for initdb and
// createdb, the user's ids for the server).
package pgproc
