// Package bench is `jetrelay bench`: the scenarios behind docs/isolation.md
// and docs/BENCHMARKS.md, run end to end on this machine. It owns the load
// generator (events written the way admin writes them), the receivers and
// black holes, the child-process runner and its resource accounting, the CPU
// profile split by component, the chart and the Markdown report writers.
// Every scenario starts jetrelay through internal/app, as `run` does, or runs
// the jetrelay binary itself.
package bench
