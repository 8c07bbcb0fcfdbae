// SPDX-License-Identifier: Apache-2.0

package reliability

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSlowReadersOfLargeResponses is slowread's short form: 100
// connections with a 4 KiB receive window ask for 1 MiB answers of a
// backend of 16 workers × 10 ms and read nothing, while normal clients
// ask for the same at 10 req/s, through sluice without admission
// control. Response buffering reads the answers into memory and
// temporary files: no pool slot and no backend worker stays held
// (without it, every slow reader holds its slot), every normal request is
// served, and once the slow readers leave no temporary file is open or
// left. slowread (make reliability) runs the attack itself, 1,000
// connections, against the quick start.
func TestSlowReadersOfLargeResponses(t *testing.T) {
	be, err := NewLargeBackend(16, 10*time.Millisecond, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	dir := t.TempDir()
	s := startSluice(t, strings.NewReplacer("BACKEND", be.URL, "DIR", dir).Replace(`listeners: [{addr: 127.0.0.1:0}]
admin: {addr: 127.0.0.1:0}
backends: {servers: [{url: BACKEND}]}
response_buffering: {temp_dir: DIR}
stages: [{name: all, match: {path_prefix: /}, controller: none}]
`))
	var slow []net.Conn
	defer func() {
		for _, c := range slow {
			c.Close()
		}
	}()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	for range 100 {
		c, err := d.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		slow = append(slow, c)
		if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	// Read from the backend at once, 100 MB take well under a second (a
	// few under -race); without buffering the slots stay held for as long
	// as the clients do not read (or until the kernel has taken it all in,
	// which on loopback can take tens of seconds).
	deadline := time.Now().Add(30 * time.Second) // a bound for a loaded machine, not a target
	for {
		st := s.srv.State(0)
		if st.InFlight == 100 && st.Backends.InFlight == 0 && be.Busy() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slow readers' answers still hold the backend: %d requests, pool %d, workers %d, buffers %+v",
				st.InFlight, st.Backends.InFlight, be.Busy(), st.ResponseBuffering)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b := s.srv.State(0).ResponseBuffering; b.MemoryBytes > b.MaxMemoryBytes || b.Files == 0 {
		t.Errorf("buffers %+v: want the memory within its cap and the rest in files", b)
	}
	sum := Summarize(OpenLoop(context.Background(), httpClient(t), "http://"+s.addr+"/big", 10, 3*time.Second))
	if sum.ServedPct != 100 {
		t.Errorf("normal requests beside the slow readers: %+v", sum)
	}
	for _, c := range slow {
		c.Close()
	}
	slow = nil
	deadline = time.Now().Add(testTimeout)
	for {
		st := s.srv.State(0)
		b := st.ResponseBuffering
		if st.InFlight == 0 && b.Files == 0 && b.DiskBytes == 0 && b.MemoryBytes == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the slow readers left: %d requests, buffers %+v", st.InFlight, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("%d files left in the temporary directory", len(ents))
	}
}
