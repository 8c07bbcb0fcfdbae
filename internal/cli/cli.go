// SPDX-License-Identifier: Apache-2.0

// Package cli holds the product's commands (proxy, validate, design,
// version) and the command-line plumbing both binaries share: the sluice
// binary (cmd/sluice) is these commands, and the lab's binary
// (lab/cmd/sluice-lab) mounts the same proxy command so that experiments
// can start proxies as child processes of one executable.
//
// Exit codes: 0 success, 1 runtime failure, 2 bad usage or bad config.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// usageError marks an error caused by bad flags, arguments or config; the
// process exits with status 2 for it.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// Usage marks err as a usage error: bad flags, arguments or config (exit
// status 2). A nil err stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// Usagef returns a usage error with a formatted message.
func Usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// usagef is Usagef, the short form this package's commands use.
func usagef(format string, args ...any) error { return Usagef(format, args...) }

// NewRoot returns a root command named name whose flag errors are usage
// errors and whose output goes to stdout and stderr; the caller adds its
// subcommands.
func NewRoot(name, short, long string, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           name,
		Short:         short,
		Long:          long,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Flag parsing errors are usage errors (exit 2).
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	return root
}

// NewRootCmd builds the sluice binary's command tree: proxy, validate,
// design and version, and a pointer to the lab's binary for the commands
// that moved there (demo, experiment, sim, testbed, load).
func NewRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := NewRoot("sluice", "Adaptive overload control for HTTP services",
		`sluice keeps HTTP services fast and alive under overload.

It implements five classic admission-control designs (Voigt & Gunningberg,
Yaksha, Li & Jamin, Andersson & Kihl, SEDA) and the adaptive limiters of
Netflix, Envoy and kratos as deterministic controllers, behind a reverse
proxy (sluice proxy) or inside a Go service (the middleware and stage API
of github.com/sluicehq/sluice).

The lab that proves it (the papers' experiments, the simulator, test
backends, the load generator and the demo) is a separate binary,
sluice-lab (module github.com/sluicehq/sluice/lab).`, stdout, stderr)
	root.AddCommand(NewProxyCmd())
	root.AddCommand(newValidateCmd())
	root.AddCommand(newDesignCmd())
	root.AddCommand(newVersionCmd())
	for _, name := range LabCommands {
		root.AddCommand(movedCmd(name))
	}
	root.Version = Version().String()
	root.SetVersionTemplate("{{.Version}}\n")
	return root
}

// exitCode maps an error returned by a command to the process exit status.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// Run executes args on root and returns the exit status; errors are
// printed to stderr after the root command's name.
func Run(root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	err := root.Execute()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", root.Name(), err)
		// cobra reports unknown commands and bad args as plain errors.
		if isCobraUsage(err) {
			return 2
		}
		return exitCode(err)
	}
	return 0
}

// run executes the sluice command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return Run(NewRootCmd(stdout, stderr), args, stderr)
}

// Main runs the sluice binary with args and returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int { return run(args, stdout, stderr) }

// isCobraUsage recognises the argument errors cobra itself produces.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "requires at most", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
