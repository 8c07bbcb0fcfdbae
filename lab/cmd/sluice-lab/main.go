// SPDX-License-Identifier: Apache-2.0

// Command sluice-lab is sluice's lab: the papers' experiments on real
// sockets (experiment), the same figures in virtual time (sim), test
// backends (testbed), the load generator (load) and the demo. The product
// (the proxy, config validation, controller design) is the sluice binary;
// this one links the same proxy command, hidden, so that experiments can
// start proxies as child processes of one executable.
//
// Exit codes: 0 success, 1 runtime failure, 2 bad usage or bad config.
package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/cli"
)

// newRootCmd builds the lab's command tree.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := cli.NewRoot("sluice-lab", "sluice's lab: experiments, simulator, test backends, load generator, demo",
		`sluice-lab proves sluice: it reproduces every paper's key results live
(experiment) and in virtual time (sim), with test backends (testbed), an
open- and closed-loop load generator (load) and a two-minute demo.

The product it tests is the sluice binary (sluice proxy, validate, design,
version) and the Go packages of github.com/sluicehq/sluice; this binary
carries the same proxy as a hidden "proxy" command for the experiments'
child processes.`, stdout, stderr)
	root.AddCommand(newDemoCmd())
	root.AddCommand(newExperimentCmd())
	root.AddCommand(newSimCmd())
	root.AddCommand(newResultsCmd())
	root.AddCommand(newTestbedCmd())
	root.AddCommand(newLoadCmd())
	root.AddCommand(newBenchCmd())
	p := cli.NewProxyCmd()
	p.Hidden = true
	root.AddCommand(p)
	return root
}

// run executes the lab's command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return cli.Run(newRootCmd(stdout, stderr), args, stderr)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
