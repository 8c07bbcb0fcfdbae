// SPDX-License-Identifier: Apache-2.0

package live

import (
	"os/exec"
	"syscall"
)

// On Linux a testbed child is sent SIGTERM when the lab dies without
// stopping it (Pdeathsig: when the thread that started it exits, which
// for a Go program is the process's exit), so that a crashed run leaves
// no services behind — nor the lock file a run under flock(1) holds, which
// its children inherit.
func init() {
	childProcPrepare = func(cmd *exec.Cmd) {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	}
}
