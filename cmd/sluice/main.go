// Command sluice keeps HTTP services fast and alive under overload. It is a
// reverse proxy with adaptive admission control, a controller design tool,
// a simulator, test backends and a load generator, in one binary.
//
// Exit codes: 0 success, 1 runtime failure, 2 bad usage or bad config.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// usageError marks an error caused by bad flags, arguments or config; the
// process exits with status 2 for it.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// newRootCmd builds the command tree. Only working subcommands are added.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Adaptive overload control for HTTP services",
		Long: `sluice keeps HTTP services fast and alive under overload.

It implements five classic admission-control designs (Voigt & Gunningberg,
Yaksha, Li & Jamin, Andersson & Kihl, SEDA) as deterministic controllers,
and tools to design, simulate and run them.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Flag parsing errors are usage errors (exit 2).
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newDesignCmd())
	root.AddCommand(newExperimentCmd())
	root.AddCommand(newDemoCmd())
	root.AddCommand(newProxyCmd())
	root.AddCommand(newValidateCmd())
	root.AddCommand(newSimCmd())
	root.AddCommand(newTestbedCmd())
	root.AddCommand(newLoadCmd())
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

// run executes the command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err != nil {
		fmt.Fprintf(stderr, "sluice: %v\n", err)
		// cobra reports unknown commands and bad args as plain errors.
		if isCobraUsage(err) {
			return 2
		}
		return exitCode(err)
	}
	return 0
}

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

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
