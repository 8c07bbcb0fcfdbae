// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/proxy/buffer"
)

// pattern returns n bytes that are not all alike, so that a reordered or
// repeated chunk shows.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + (i/7+i/4093)%26)
	}
	return b
}

// bigBackend serves body with a Content-Length (or chunked with
// chunked), and counts the handlers still writing: a backend worker is
// busy until its handler has written the last byte.
type bigBackend struct {
	url     string
	writing atomic.Int64
	served  atomic.Int64
}

func newBigBackend(t *testing.T, body []byte, chunked bool) *bigBackend {
	b := &bigBackend{}
	s := backend(t, func(w http.ResponseWriter, r *http.Request) {
		b.writing.Add(1)
		defer b.writing.Add(-1)
		if !chunked {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		if v := r.URL.Query().Get("accel"); v != "" {
			w.Header().Set(buffer.HeaderAccelBuffering, v)
		}
		if v := r.URL.Query().Get("type"); v != "" {
			w.Header().Set("Content-Type", v)
		}
		for p := body; len(p) > 0; {
			n := min(len(p), 64<<10)
			if _, err := w.Write(p[:n]); err != nil {
				return
			}
			if chunked {
				http.NewResponseController(w).Flush()
			}
			p = p[n:]
		}
		b.served.Add(1)
	})
	b.url = s.URL
	return b
}

// slowClient sends GET path and reads nothing until read is called. The
// socket buffers on the way absorb a few MiB of an answer (the proxy's
// send buffer grows to tcp_wmem's maximum, 4 MiB here): the tests use
// answers of 16 MiB. (A receive buffer made small after the connection
// is up would stall the transfer: the window never opens by a segment.)
type slowClient struct {
	c  net.Conn
	br *bufio.Reader
}

// bigBody is larger than the socket buffers between the proxy and a
// client that reads nothing.
const bigBody = 16 << 20

func newSlowClient(t *testing.T, addr, path string) *slowClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(testTimeout))
	_, err = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n")
	must(t, err)
	return &slowClient{c: c, br: bufio.NewReader(c)}
}

// read reads the whole answer.
func (s *slowClient) read(t *testing.T) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := http.ReadResponse(s.br, nil)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b, err
}

// metric returns the value of one sample of the proxy's /metrics, the
// line starting with name (labels included), or -1.
func (r *running) metric(t *testing.T, name string) float64 {
	t.Helper()
	for _, l := range strings.Split(r.metricsText(t), "\n") {
		if rest, ok := strings.CutPrefix(l, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			must(t, err)
			return v
		}
	}
	return -1
}

// bufConfig is a proxy in front of url with a response_buffering section.
func bufConfig(url, section string) string {
	return baseConfig(url, "response_buffering:\n"+section)
}

// A slow reader of a large response does not hold the backend: the
// response is read into memory and a temporary file as fast as the
// backend sends it, the backend's handler returns and the pool slot is
// free while the client has read nothing, and what the client has not
// read soon after moves from memory to the file; the client then gets
// every byte. Without buffering (enabled: false) the backend stays held.
func TestSlowReaderOfALargeResponseFreesTheBackend(t *testing.T) {
	body := pattern(bigBody)
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			be := newBigBackend(t, body, chunked)
			dir := t.TempDir()
			p := startProxy(t, bufConfig(be.url, "  temp_dir: "+dir+"\n"))
			c := newSlowClient(t, p.addr, "/big")
			eventually(t, "the backend to finish and its slot to be free", func() bool {
				st := p.state(t)
				return be.served.Load() == 1 && be.writing.Load() == 0 && st.Backends.InFlight == 0 && st.InFlight == 1
			})
			if st := p.state(t).ResponseBuffering; st.MemoryBytes > buffer.DefaultMemoryBytes {
				t.Errorf("buffers while the client waits: %+v, want at most memory_bytes of memory", st)
			}
			// What the client has not read within parkAfter of the
			// backend's end moves from memory to the file.
			eventually(t, "the unread part parked in the temporary file", func() bool {
				st := p.state(t).ResponseBuffering
				return st.Files == 1 && st.DiskBytes > 0 && st.MemoryBytes == 0
			})
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("temporary directory holds %d names; the file must be unlinked", len(ents))
			}
			resp, got, err := c.read(t)
			if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, body) {
				t.Fatalf("answer: %v, %d bytes (equal %v), %v", resp, len(got), bytes.Equal(got, body), err)
			}
			eventually(t, "the buffers to be freed", func() bool {
				st := p.state(t)
				b := st.ResponseBuffering
				return st.InFlight == 0 && b.Files == 0 && b.DiskBytes == 0 && b.MemoryBytes == 0
			})
			if v := p.metric(t, `proxy_responses_buffered_total{where="disk"}`); v != 1 {
				t.Errorf(`proxy_responses_buffered_total{where="disk"} = %v, want 1`, v)
			}
		})
	}
	t.Run("disabled", func(t *testing.T) {
		be := newBigBackend(t, body, false)
		p := startProxy(t, bufConfig(be.url, "  enabled: false\n"))
		c := newSlowClient(t, p.addr, "/big")
		eventually(t, "the request at the backend", func() bool { return be.writing.Load() == 1 })
		time.Sleep(300 * time.Millisecond)
		if st := p.state(t); st.Backends.InFlight != 1 {
			t.Fatalf("without buffering the slow reader must hold its backend slot: pool %d", st.Backends.InFlight)
		}
		resp, got, err := c.read(t)
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, body) {
			t.Fatalf("answer: %d bytes, %v", len(got), err)
		}
		if v := p.metric(t, `proxy_responses_unbuffered_total{reason="config"}`); v != 1 {
			t.Errorf(`proxy_responses_unbuffered_total{reason="config"} = %v, want 1`, v)
		}
	})
}

// fdsIn counts this process's open descriptors on files in dir (an
// unlinked file reads "dir/name (deleted)").
func fdsIn(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(l, dir+"/") {
			n++
		}
	}
	return n
}

// Temporary files go when the client aborts, while the response is
// still spooled; and at start, the files of processes no longer running
// are removed, never those of a running one.
func TestBufferTempFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	dead := exec.Command("true")
	must(t, dead.Run())
	stale := filepath.Join(dir, fmt.Sprintf("sluice-resp-%d-123", dead.Process.Pid))
	mine := filepath.Join(dir, fmt.Sprintf("sluice-resp-%d-456", os.Getpid()))
	initPid := filepath.Join(dir, "sluice-resp-1-789")
	other := filepath.Join(dir, "unrelated")
	for _, f := range []string{stale, mine, initPid, other} {
		must(t, os.WriteFile(f, []byte("x"), 0o600))
	}
	body := pattern(bigBody)
	be := newBigBackend(t, body, false)
	p := startProxy(t, bufConfig(be.url, "  temp_dir: "+dir+"\n  memory_bytes: 65536\n"))
	for f, want := range map[string]bool{stale: false, mine: true, initPid: true, other: true} {
		if _, err := os.Stat(f); (err == nil) != want {
			t.Errorf("%s: exists %v after start, want %v", filepath.Base(f), err == nil, want)
		}
	}

	c := newSlowClient(t, p.addr, "/big")
	eventually(t, "the response spooled", func() bool {
		b := p.state(t).ResponseBuffering
		return be.served.Load() == 1 && b.Files == 1
	})
	if n := fdsIn(t, dir); n != 1 {
		t.Errorf("%d descriptors on the temporary directory, want 1", n)
	}
	c.c.Close() // the client goes away without reading
	eventually(t, "the file closed and the buffers freed", func() bool {
		st := p.state(t)
		b := st.ResponseBuffering
		return st.InFlight == 0 && b.Files == 0 && b.DiskBytes == 0 && b.MemoryBytes == 0 && fdsIn(t, dir) == 0
	})
	ents, err := os.ReadDir(dir)
	must(t, err)
	if len(ents) != 3 {
		t.Errorf("directory holds %d names, want the 3 left at start", len(ents))
	}
}

// When memory and disk run out, responses fall back to pass-through with
// back-pressure, counted as budget, and arrive whole: the first fills
// its memory (the whole cap; no temporary files) and then waits for its
// client, holding its backend slot as without buffering; the second finds
// the cap taken and is passed through from the start. The cap counts the
// 32 KiB copy buffer that writes the first response to its client.
func TestBufferBudgetFallsBackToPassThrough(t *testing.T) {
	body := pattern(bigBody)
	be := newBigBackend(t, body, true)
	p := startProxy(t, bufConfig(be.url, "  memory_bytes: 1048576\n  max_memory_bytes: 1048576\n  max_file_bytes: -1\n  connection_memory_bytes: -1\n"))
	first := newSlowClient(t, p.addr, "/1")
	eventually(t, "the first response's memory full", func() bool {
		b := p.state(t).ResponseBuffering
		return b.MemoryBytes+b.CopyBytes == 1<<20 // the copy buffer's chunk is the budget's
	})
	second := newSlowClient(t, p.addr, "/2")
	eventually(t, "both at the backend", func() bool { return be.writing.Load() == 2 })
	time.Sleep(200 * time.Millisecond)
	if st := p.state(t); st.Backends.InFlight != 2 || st.ResponseBuffering.MemoryBytes+st.ResponseBuffering.CopyBytes != 1<<20 {
		t.Errorf("both responses must hold their slots, the memory its cap: pool %d, %+v", st.Backends.InFlight, st.ResponseBuffering)
	}
	passedThroughWhole(t, p, body, second, first)
	eventually(t, "the buffers freed", func() bool {
		st := p.state(t)
		return st.InFlight == 0 && st.ResponseBuffering.MemoryBytes == 0
	})
	if v := p.metric(t, `proxy_responses_buffered_total{where="memory"}`); v != 0 {
		t.Errorf(`proxy_responses_buffered_total{where="memory"} = %v, want 0`, v)
	}
}

// The same when the temporary files' cap is full too: the first response
// fills its memory and the disk cap (all but less than a chunk, the
// filler's unit) and then waits for its client
// (back-pressure on the backend); the second finds both caps taken and
// is passed through; both are counted as budget and arrive whole.
func TestBufferDiskCapFallsBackToPassThrough(t *testing.T) {
	body := pattern(bigBody)
	be := newBigBackend(t, body, false)
	dir := t.TempDir()
	p := startProxy(t, bufConfig(be.url, "  temp_dir: "+dir+"\n  memory_bytes: 65536\n  max_memory_bytes: 65536\n  max_file_bytes: 1048576\n  max_disk_bytes: 1048576\n  connection_memory_bytes: -1\n"))
	first := newSlowClient(t, p.addr, "/1")
	eventually(t, "the first response's memory and disk full", func() bool {
		b := p.state(t).ResponseBuffering
		return b.MemoryBytes+b.CopyBytes == 65536 && b.DiskBytes > 1<<20-32<<10 && b.Files == 1
	})
	second := newSlowClient(t, p.addr, "/2")
	eventually(t, "both at the backend", func() bool { return be.writing.Load() == 2 })
	time.Sleep(200 * time.Millisecond)
	if st := p.state(t); st.Backends.InFlight != 2 || st.ResponseBuffering.Files != 1 {
		t.Errorf("both responses must hold their slots, one file: pool %d, %+v", st.Backends.InFlight, st.ResponseBuffering)
	}
	passedThroughWhole(t, p, body, second, first)
	eventually(t, "the buffers freed", func() bool {
		st := p.state(t)
		b := st.ResponseBuffering
		return st.InFlight == 0 && b.MemoryBytes == 0 && b.DiskBytes == 0 && b.Files == 0 && fdsIn(t, dir) == 0
	})
	if v := p.metric(t, `proxy_gateway_errors_total{code="502"}`); v > 0 {
		t.Errorf("502s: %v", v)
	}
}

// A backend that fails in the middle of a buffered body: the backend is
// released at once, and the client gets the bytes before the failure and
// then a truncated answer, never a complete-looking one.
func TestBufferedBackendFailureMidBody(t *testing.T) {
	const size = 2 * bigBody
	backendAddr := rawBackend(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", size)
		_, _ = c.Write(pattern(size / 2))
		time.Sleep(20 * time.Millisecond)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	})
	p := startProxy(t, baseConfig("http://"+backendAddr, ""))
	c := newSlowClient(t, p.addr, "/cut")
	eventually(t, "the backend's slot freed before the client read", func() bool {
		st := p.state(t)
		return st.Backends.InFlight == 0 && st.InFlight == 1
	})
	resp, got, err := c.read(t)
	if resp == nil || resp.StatusCode != 200 {
		t.Fatalf("answer %v, %v", resp, err)
	}
	if err == nil || len(got) >= size || !bytes.Equal(got, pattern(size / 2)[:len(got)]) {
		t.Fatalf("a cut body read as %d bytes with error %v; want the bytes before the failure and an error", len(got), err)
	}
	eventually(t, "the request over and the buffers freed", func() bool {
		st := p.state(t)
		return st.InFlight == 0 && st.ResponseBuffering.MemoryBytes == 0 && st.ResponseBuffering.DiskBytes == 0
	})
}

// Trailers of a buffered chunked response reach the client.
func TestBufferedTrailers(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		_, _ = w.Write(pattern(100 << 10))
		http.NewResponseController(w).Flush()
		_, _ = w.Write(pattern(10))
		w.Header().Set("X-Sum", "42")
	})
	p := startProxy(t, baseConfig(be.URL, ""))
	resp, err := client.Get(p.url + "/t")
	must(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	must(t, err)
	if len(got) != 100<<10+10 || resp.Trailer.Get("X-Sum") != "42" {
		t.Fatalf("%d bytes, trailer %q", len(got), resp.Trailer.Get("X-Sum"))
	}
	// The filler counts the response when it ends, which may be after
	// the client has read the last byte.
	eventually(t, `proxy_responses_buffered_total{where="memory"} = 1`, func() bool {
		return p.metric(t, `proxy_responses_buffered_total{where="memory"}`) == 1
	})
}

// Streams are never buffered: X-Accel-Buffering: no, the configuration's
// exclusions, event streams; X-Accel-Buffering: yes overrides an
// exclusion. Responses without a body are not counted.
func TestBufferedOrNot(t *testing.T) {
	be := newBigBackend(t, []byte("hello"), false)
	p := startProxy(t, bufConfig(be.url, "  exclude_paths: [/raw/]\n  exclude_content_types: [Video/]\n"))
	for _, path := range []string{"/a", "/b?accel=no", "/raw/x", "/v?type=video/mp4", "/raw/y?accel=yes", "/e?type=text/event-stream"} {
		if code, _, body := get(t, p.url+path, nil); code != 200 || body != "hello" {
			t.Fatalf("%s: %d %q", path, code, body)
		}
	}
	req, err := http.NewRequest(http.MethodHead, p.url+"/h", nil)
	must(t, err)
	resp, err := client.Do(req)
	must(t, err)
	resp.Body.Close()
	m := p.metricsText(t)
	for _, want := range []string{
		`proxy_responses_buffered_total{where="memory"} 2`,
		`proxy_responses_unbuffered_total{reason="header"} 1`,
		`proxy_responses_unbuffered_total{reason="config"} 2`,
		`proxy_responses_unbuffered_total{reason="stream"} 1`,
		`proxy_responses_unbuffered_total{reason="budget"} 0`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "proxy_response"))
		}
	}
}

// Many clients that give up mid-response, with responses in memory and
// on disk: nothing is left held.
func TestBufferManyAborts(t *testing.T) {
	body := pattern(512 << 10)
	be := newBigBackend(t, body, false)
	dir := t.TempDir()
	p := startProxy(t, bufConfig(be.url, "  temp_dir: "+dir+"\n  memory_bytes: 65536\n  max_memory_bytes: 1048576\n"))
	for i := range 40 {
		c := newSlowClient(t, p.addr, "/"+strconv.Itoa(i))
		if i%3 == 0 {
			// read the headers and a little
			resp, err := http.ReadResponse(c.br, nil)
			if err == nil {
				_, _ = io.CopyN(io.Discard, resp.Body, int64(i*1000))
			}
		}
		if i%2 == 0 {
			time.Sleep(time.Millisecond)
		}
		c.c.Close()
	}
	eventually(t, "every request over and the buffers freed", func() bool {
		st := p.state(t)
		b := st.ResponseBuffering
		return st.InFlight == 0 && st.Backends.InFlight == 0 && b.Files == 0 && b.DiskBytes == 0 && b.MemoryBytes == 0 && fdsIn(t, dir) == 0
	})
}

// A request's deadline (X-Sluice-Timeout) bounds the backend's side of a
// buffered response, not the client's reading of it. A response the
// backend finished in time reaches a client that starts to read after the
// deadline whole, and counts one sample of the backend's time (not the
// client's), taken when the backend finished; a backend still sending
// at the deadline is cut there, its slot given back at once, and the
// client gets the bytes before the cut and then a truncated answer.
func TestBufferedResponseUnderDeadline(t *testing.T) {
	body := pattern(bigBody)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	be := backend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.URL.Path == "/cut" {
			_, _ = w.Write(body[:1<<20])
			http.NewResponseController(w).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = w.Write(body)
	})
	r := startManual(t, baseConfig(be.URL, apiRateStage))
	t0 := time.Now().Add(time.Hour)
	r.stepPolicy(t0)
	send := func(path string, timeout time.Duration) *slowClient {
		c, err := net.Dial("tcp", r.addr)
		must(t, err)
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(testTimeout))
		_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: a\r\n%s: %s\r\n\r\n", path, sluice.TimeoutHeader, sluice.FormatTimeout(timeout))
		must(t, err)
		return &slowClient{c: c, br: bufio.NewReader(c)}
	}

	// 3 s: the 16 MiB take 50-250 ms here, over a second under -race on
	// a loaded machine.
	const whole = 3 * time.Second
	sent := time.Now()
	c := send("/whole", whole)
	eventually(t, "the backend's slot given back before the client reads", func() bool {
		st := r.state(t)
		return st.Backends.InFlight == 0 && st.InFlight == 1
	})
	if be := time.Since(sent); be >= whole {
		t.Fatalf("the backend took %v, past the deadline of %v: the machine is too slow for this test", be, whole)
	}
	time.Sleep(time.Until(sent.Add(whole + 200*time.Millisecond))) // the deadline passes; the client has read nothing
	resp, got, err := c.read(t)
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, body) {
		t.Fatalf("a response finished before its deadline: %v, %d bytes (equal %v), %v", resp, len(got), bytes.Equal(got, body), err)
	}
	r.stepPolicy(t0.Add(2 * time.Second))
	last := r.state(t).Stages[0].Classes[0].Last
	if last == nil || last.Samples != 1 || last.P50MS >= float64(whole/time.Millisecond) {
		t.Fatalf("last period %+v: want one sample of the backend's time, under the %v deadline", last, whole)
	}

	c = send("/cut", 300*time.Millisecond)
	eventually(t, "the backend cut at the deadline and its slot given back", func() bool {
		st := r.state(t)
		return st.Backends.InFlight == 0 && st.InFlight == 1
	})
	resp, got, err = c.read(t)
	if resp == nil || resp.StatusCode != 200 || err == nil || len(got) >= len(body) || !bytes.Equal(got, body[:len(got)]) {
		t.Fatalf("a response cut at its deadline: %v, %d bytes, %v; want a truncated body and an error", resp, len(got), err)
	}
	eventually(t, "the request over and the buffers freed", func() bool {
		st := r.state(t)
		return st.InFlight == 0 && st.ResponseBuffering.MemoryBytes == 0 && st.ResponseBuffering.DiskBytes == 0
	})
}

// passedThroughWhole checks that two responses were passed through for
// want of budget and that clients, read in turn, get body whole.
func passedThroughWhole(t *testing.T, p *running, body []byte, clients ...*slowClient) {
	t.Helper()
	if v := p.metric(t, `proxy_responses_unbuffered_total{reason="budget"}`); v != 2 {
		t.Errorf(`proxy_responses_unbuffered_total{reason="budget"} = %v, want 2`, v)
	}
	for i, c := range clients {
		resp, got, err := c.read(t)
		if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, body) {
			t.Fatalf("answer %d: %d bytes (equal %v), %v", i, len(got), bytes.Equal(got, body), err)
		}
	}
}
