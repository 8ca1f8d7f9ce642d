package jetrelaycmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/jetrelay/jetrelay/internal/bench"
	"github.com/jetrelay/jetrelay/internal/cli"
	"github.com/jetrelay/jetrelay/internal/demo"
	"github.com/jetrelay/jetrelay/internal/inbox"
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
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// realMain runs one command line and returns its exit status: 0 on
// success; 2 on a usage error, printed as one line with a pointer to the
// command's --help; 1 on any other error, printed once.
func realMain(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot(getenv)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	switch {
	case err == nil:
		return 0
	case cli.IsUsage(err):
		fmt.Fprintf(stderr, "jetrelay: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
		return 2
	default:
		fmt.Fprintln(stderr, "jetrelay:", err)
		return 1
	}
}

// newRoot is the jetrelay command with every subcommand; getenv is the
// environment every command reads its settings from.
func newRoot(getenv func(string) string) *cobra.Command {
	// Commands in the order they are listed here: run first, version last.
	cobra.EnableCommandSorting = false
	root := cli.NewRoot("jetrelay")
	root.Short = "webhook and event delivery on NATS JetStream (Cycles events service replacement)"
	root.Long = `jetrelay: webhook and event delivery on NATS JetStream (Cycles events service replacement).

Flags may come before or after a command's arguments. Exit status: 0 on
success, 1 on an error, 2 on a usage error (unknown command or flag, bad
flag value, wrong number of arguments).`
	root.Version = version
	root.SetVersionTemplate("jetrelay {{.Version}}\n")
	root.Args = func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return cli.Usagef("unknown command %q", args[0])
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		return cli.Usagef("name a command: %s", cli.Subcommands(cmd))
	}
	root.AddCommand(
		runCommand(getenv),
		demo.NewCommand(version, getenv),
		bench.NewCommand(version, getenv),
		subscriptions.NewCommand(getenv),
	)
	root.AddCommand(opsCommands(getenv)...)
	root.AddCommand(
		handbackCommand(getenv),
		inbox.NewCommand(getenv),
		mgmt.HealthcheckCommand(getenv),
		&cobra.Command{
			Use:   "version",
			Short: "print the version",
			Args:  cli.NoArgs,
			Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "jetrelay", version) },
		},
	)
	return root
}
