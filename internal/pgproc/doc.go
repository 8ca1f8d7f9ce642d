// Package pgproc runs a private PostgreSQL server as a child process for
// tests and benchmarks: initdb on a fresh temporary data folder, pg_ctl start
// on a free loopback port, pg_ctl stop (or SIGKILL) at the end. It never
// touches a system database. Debian keeps the server binaries off PATH, so
// they are found through `pg_config --bindir`; initdb refuses to run as root,
// so a root caller runs them as the postgres user (runuser).
package pgproc
