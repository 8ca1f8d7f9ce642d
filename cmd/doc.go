// Package jetrelaycmd is the jetrelay command line (`run`, `demo`, `bench`,
// `subscriptions`, the operator commands, `handback`, `inbox`,
// `healthcheck`, `version`, `completion`) as an importable package, so that
// a build with extra transport plugins is a main package of its own module
// that blank-imports them and calls Main (docs/transports.md). It holds the
// root cobra command, `run` and `handback`, and the exit rule (0, 1 on an
// error, 2 on a usage error); each other command family is a cobra command
// of the internal/ package that does its work. The built-in transports
// (webhook, natsink, sqs) are always compiled in.
package jetrelaycmd
