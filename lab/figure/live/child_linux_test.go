// SPDX-License-Identifier: Apache-2.0

package live

import (
	"os/exec"
	"syscall"
	"testing"
)

// A testbed child started by the lab dies with it.
func TestChildDiesWithTheLab(t *testing.T) {
	cmd := exec.Command("true")
	childProcPrepare(cmd)
	if cmd.SysProcAttr == nil || cmd.SysProcAttr.Pdeathsig != syscall.SIGTERM {
		t.Errorf("SysProcAttr %+v, want Pdeathsig SIGTERM", cmd.SysProcAttr)
	}
}
