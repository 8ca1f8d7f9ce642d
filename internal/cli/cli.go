package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// UsageError is a command line that cannot run as given: an unknown
// command or flag, a bad flag value, the wrong number of arguments. The
// binary prints it on one line with a pointer to --help and exits 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message (%w wraps).
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// IsUsage reports whether err is, or wraps, a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

func flagError(_ *cobra.Command, err error) error { return &UsageError{Err: err} }

// NoArgs refuses positional arguments.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("%s: unexpected argument %q", name(cmd), args[0])
	}
	return nil
}

// ExactArgs wants n positional arguments, described by what (e.g. "ID").
func ExactArgs(n int, what string) cobra.PositionalArgs {
	return RangeArgs(n, n, what)
}

// RangeArgs wants min to max positional arguments, described by what.
func RangeArgs(min, max int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return Usagef("%s: want %s (got %d arguments)", name(cmd), what, len(args))
		}
		return nil
	}
}

// Group makes cmd a family of the subcommands subs: run without one, or
// with a name that is none of them, it is a usage error that lists them.
func Group(cmd *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	cmd.AddCommand(subs...)
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return Usagef("%s: unknown subcommand %q (have %s)", name(c), args[0], Subcommands(c))
		}
		return nil
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		return Usagef("%s: name a subcommand: %s", name(c), Subcommands(c))
	}
	return cmd
}

// name is a command's path without the binary's name: "deliveries list".
func name(cmd *cobra.Command) string {
	path := cmd.CommandPath()
	if cmd.HasParent() {
		_, path, _ = strings.Cut(path, " ")
	}
	return path
}

// Subcommands lists cmd's commands a user can run, comma-separated.
func Subcommands(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}

// NewRoot is a root command with jetrelay's conventions: errors are
// returned, not printed (the caller prints them once, by the exit rule),
// and every flag parse error is a usage error. Tests of a command family
// run its commands under one.
func NewRoot(use string) *cobra.Command {
	root := &cobra.Command{Use: use, SilenceErrors: true, SilenceUsage: true}
	root.SetFlagErrorFunc(flagError)
	return root
}
