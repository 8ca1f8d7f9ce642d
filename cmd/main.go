package jetrelaycmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/jetrelay/jetrelay/internal/bench"
	"github.com/jetrelay/jetrelay/internal/demo"
	"github.com/jetrelay/jetrelay/internal/mgmt"
	"github.com/jetrelay/jetrelay/internal/subscriptions"
)

// version is set at build time with
// -ldflags "-X github.com/jetrelay/jetrelay/cmd.version=…".
var version = "0.1.0-dev"

// Main runs the jetrelay command line with the process's arguments and
// exits with its status: 0 on success, 1 on an error, 2 on a usage error.
// A custom build's main calls it after blank-importing its transport
// plugins, which is all a plugin author's binary needs:
//
//	package main
//
//	import (
//		jetrelaycmd "github.com/jetrelay/jetrelay/cmd"
//		_ "example.com/myplugin"
//	)
//
//	func main() { jetrelaycmd.Main() }
func Main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(ctx, args[1:], stdout, stderr)
	case "demo":
		err = demo.Run(ctx, args[1:], stdout, stderr, version)
	case "bench":
		err = bench.Run(ctx, args[1:], stdout, stderr, version)
	case "subscriptions":
		err = subscriptions.Run(ctx, args[1:], stdout, stderr)
	case "deliveries", "quarantine", "status", "events":
		err = cmdOps(ctx, args, stdout, stderr)
	case "handback":
		err = cmdHandback(ctx, args[1:], stdout, stderr)
	case "inbox":
		err = cmdInbox(ctx, args[1:], stdout, stderr)
	case "healthcheck":
		err = mgmt.HealthcheckCommand(ctx, args[1:], os.Getenv, stdout)
	case "version", "--version":
		fmt.Fprintln(stdout, "jetrelay", version)
	case "help", "-h", "--help":
		usage(stdout)
	default:
		fmt.Fprintf(stderr, "jetrelay: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintln(stderr, "jetrelay:", err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `jetrelay: webhook and event delivery on NATS JetStream (Cycles events service replacement)

Commands:
  run       run the bridge (Redis dispatch:pending → JetStream) and the engine (JetStream → destinations)
  demo      self-contained demo: embedded NATS, throwaway redis-server, receiver, live progress
  bench     benchmark a scenario on this machine (e.g. --scenario isolation --out docs/isolation.md)
  subscriptions  create|get|list|set-status subscriptions for nats://, sqs:// and other transports admin's API refuses
  deliveries     list|inspect|requeue deliveries: what happened to an event, where it is now, send it again
  quarantine     list|requeue entries of dispatch:failed
  status         queue depth, in flight, scheduled, held, bridges, breakers and limits per replica
  events         emit an event and its deliveries as admin does (try a real delivery in one command)
  handback  rollback: with jetrelay stopped, return every delivery it holds to dispatch:pending / dispatch:retry (docs/migration.md)
  inbox     serve|list|inspect|replay|purge a durable receiving inbox in PostgreSQL (verify, store, forward)
  healthcheck  exit 0 when this host's jetrelay answers /readyz (or --url) with 2xx, 1 otherwise: a container's health check
  version   print the version

Run 'jetrelay <command> --help' for the command's settings.
`)
}
