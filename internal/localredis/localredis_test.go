// SPDX-License-Identifier: Apache-2.0

package localredis

import (
	"bufio"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testcert"
)

// pingOK sends PING on a new connection and reports whether +PONG came
// back within d.
func pingOK(addr string, d time.Duration) bool {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// wantAnswer fails t unless s, in the given state, answers a plaintext
// PING on its address within 2 s or, when answers is false, does not
// within 300 ms.
func wantAnswer(t *testing.T, s *Server, state string, answers bool) {
	t.Helper()
	wait := 300 * time.Millisecond
	if answers {
		wait = 2 * time.Second
	}
	if pingOK(s.Addr, wait) != answers {
		t.Errorf("a %s server answered PING on %s: %v, want %v", state, s.Addr, !answers, answers)
	}
}

// A real redis-server through its life: started on a loopback port,
// paused (connections hang), resumed, killed (nothing listens), restarted
// on the same address, stopped with its directory removed.
func TestServerLifecycle(t *testing.T) {
	s := ForTest(t)
	if host, _, _ := net.SplitHostPort(s.Addr); host != "127.0.0.1" {
		t.Fatalf("address %s is not on loopback", s.Addr)
	}
	if !pingOK(s.Addr, 2*time.Second) || s.PID() == 0 {
		t.Fatalf("a started server does not answer PING (pid %d)", s.PID())
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, s, "paused", false)
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, s, "resumed", true)
	pid := s.PID()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.PID() != 0 || syscall.Kill(pid, 0) == nil {
		t.Errorf("process %d still there after Kill", pid)
	}
	wantAnswer(t, s, "killed", false)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, s, "restarted", true)
	dir := s.dir
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left after Stop: %v", dir, err)
	}
}

// A TLS-only server with the default user off: it is up when PING over
// TLS answers NOAUTH; a plaintext PING gets no PONG; a restart keeps
// its options.
func TestTLSServerWithUsers(t *testing.T) {
	ca := testcert.NewCA(t, "CA")
	dir := t.TempDir()
	cert, key := ca.Issue(t, testcert.Leaf{CommonName: "redis", IPs: []string{"127.0.0.1"}}).Write(t, dir, "redis")
	s := ForTestWith(t, Options{TLS: &TLSFiles{Cert: cert, Key: key, CA: ca.WriteCA(t)}, Users: []string{"default off", "bob on >pw ~* +@all"}})
	if line, err := s.command("PING"); err != nil || !strings.HasPrefix(line, "-NOAUTH") {
		t.Fatalf("PING over TLS as the default user: %q %v", line, err)
	}
	if line, err := s.command("AUTH bob pw"); err != nil || line != "+OK" {
		t.Fatalf("AUTH bob: %q %v", line, err)
	}
	wantAnswer(t, s, "TLS-only", false) // to a plaintext PING
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if line, err := s.command("PING"); err != nil || !strings.HasPrefix(line, "-NOAUTH") {
		t.Fatalf("after a restart: %q %v", line, err)
	}
}

// FreePorts hands out distinct ports: each is held until all are known.
func TestFreePortsDistinct(t *testing.T) {
	ports, err := FreePorts(16)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: %d repeated or invalid", ports, p)
		}
		seen[p] = true
	}
}
