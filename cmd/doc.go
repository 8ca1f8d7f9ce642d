// Package jetrelaycmd is the jetrelay command line (`run`, `demo`, `bench`,
// `subscriptions`, `version`) as an importable package, so that a build
// with extra transport plugins is a main package of its own module that
// blank-imports them and calls Main (docs/transports.md). It holds
// subcommand dispatch and flag parsing only; the application and the
// subcommands' logic live in packages under internal/. The built-in
// transports (webhook, natsink, sqs) are always compiled in.
package jetrelaycmd
