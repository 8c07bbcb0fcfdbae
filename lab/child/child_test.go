// SPDX-License-Identifier: Apache-2.0

package child

import (
	"context"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain makes the test binary its own child: with CHILD_LISTEN set it
// listens there until a signal ends it; with CHILD_EXIT set it exits at
// once.
func TestMain(m *testing.M) {
	if addr := os.Getenv("CHILD_LISTEN"); addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			os.Exit(3)
		}
		for {
			c, err := l.Accept()
			if err != nil {
				os.Exit(4)
			}
			c.Close()
		}
	}
	if os.Getenv("CHILD_EXIT") != "" {
		os.Exit(7)
	}
	os.Exit(m.Run())
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestStartWaitsForTheListenerAndStopEndsIt(t *testing.T) {
	addr := freeAddr(t)
	t.Setenv("CHILD_LISTEN", addr)
	p, err := Start(t.Context(), addr, syscall.SIGTERM, os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("Start returned before %s accepted: %v", addr, err)
	}
	c.Close()
	if err := p.Stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if p.Cmd.ProcessState == nil || !p.Cmd.ProcessState.Exited() && p.Cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("child state after Stop: %v", p.Cmd.ProcessState)
	}
}

func TestStartReportsAChildThatExits(t *testing.T) {
	t.Setenv("CHILD_EXIT", "1")
	_, err := Start(t.Context(), freeAddr(t), syscall.SIGTERM, os.Args[0])
	if err == nil || !strings.Contains(err.Error(), "exited before listening") {
		t.Fatalf("err = %v, want exited before listening", err)
	}
}

func TestStartGivesUpWithTheContext(t *testing.T) {
	addr := freeAddr(t)
	t.Setenv("CHILD_LISTEN", "")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	// `sleep` never listens: Start must return with the context and stop it.
	p, err := Start(ctx, addr, syscall.SIGTERM, "sleep", "30")
	if err == nil {
		_ = p.Stop(syscall.SIGTERM)
		t.Fatal("Start returned without a listener")
	}
	if err != context.DeadlineExceeded {
		t.Fatalf("err = %v, want the context's", err)
	}
}
