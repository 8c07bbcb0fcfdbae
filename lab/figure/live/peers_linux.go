// SPDX-License-Identifier: Apache-2.0

package live

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// On Linux, nginx and HAProxy get their own process group, so that
// closing one signals its master and workers together and a Ctrl-C at the
// terminal reaches only sluice, which stops them in order; and they are
// sent SIGTERM if sluice dies without stopping them (Pdeathsig: when the
// thread that started them exits, which for a Go program is the process's
// exit).
func init() {
	peerProcPrepare = func(cmd *exec.Cmd) {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	}
	peerProcSignal = func(p *os.Process, sig syscall.Signal) error {
		return syscall.Kill(-p.Pid, sig)
	}
	rigCPU = func() (time.Duration, bool) {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0, false
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
	}
}
