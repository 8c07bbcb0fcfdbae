// SPDX-License-Identifier: Apache-2.0

// Command sluice keeps HTTP services fast and alive under overload: a
// reverse proxy with adaptive admission control (sluice proxy), config
// validation (sluice validate), controller design (sluice design) and
// sluice version. The lab (experiments, simulator, test backends, load
// generator, demo) is the separate binary sluice-lab, in the module
// github.com/sluicehq/sluice/lab.
//
// Exit codes: 0 success, 1 runtime failure, 2 bad usage or bad config.
package main

import (
	"os"

	"github.com/sluicehq/sluice/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
