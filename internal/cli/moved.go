// SPDX-License-Identifier: Apache-2.0

package cli

import "github.com/spf13/cobra"

// LabCommands are the commands that moved from the sluice binary to the
// lab's binary, sluice-lab.
var LabCommands = []string{"demo", "experiment", "sim", "testbed", "load"}

// movedCmd is a hidden command that answers a lab command typed by habit
// with where it went (exit status 2).
func movedCmd(name string) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return usagef("%q moved to the lab's binary: run `sluice-lab %s` "+
				"(from a clone: make lab, then bin/sluice-lab %s; or cd lab && go run ./cmd/sluice-lab %s)",
				name, name, name, name)
		},
	}
}
