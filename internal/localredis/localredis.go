// SPDX-License-Identifier: Apache-2.0

// Package localredis runs a throwaway redis-server for tests and
// experiments (cluster mode's own tests in this module, the lab's cluster
// figures): Debian's redis-server binary on a free loopback port,
// with its files in a temporary directory and no persistence, stopped by
// its process id; optionally TLS-only, with ACL users, or as a
// one-node Redis Cluster (Options). Nothing here is for production.
package localredis

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/testkit"
)

// RequireEnv is the environment variable that makes ForTest fail rather
// than skip when redis-server is missing (make test sets it, after
// installing the package).
const RequireEnv = "SLUICE_REQUIRE_REDIS"

// startTimeout bounds the wait for a new server's first PONG.
const startTimeout = 10 * time.Second

// Server is one redis-server process. Its methods are safe for concurrent
// use.
type Server struct {
	// Addr is the server's loopback address, host:port.
	Addr string

	path string
	dir  string
	port int
	opts Options
	tls  *tls.Config // the client side of PING, with Options.TLS

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Path returns the redis-server binary, or an error saying how to get it.
func Path() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("redis-server is not installed (Debian: apt-get install redis-server; make test installs it)")
	}
	return p, nil
}

// Options are what StartWith runs besides a plain server.
type Options struct {
	// TLS, when set, makes the server speak TLS only, on Addr (no
	// plaintext port).
	TLS *TLSFiles
	// Users are ACL users, each the rest of an ACL file's "user" line:
	// "alice on >secret ~* &* +@all". "default off" disables the
	// default user (PING then answers NOAUTH, which counts as up).
	Users []string
	// Cluster runs the server as a one-node Redis Cluster owning every
	// slot (and, with TLS, its cluster bus over TLS too), ready when
	// StartWith returns.
	Cluster bool
}

// TLSFiles are the PEM files of a TLS server.
type TLSFiles struct {
	// Cert and Key are the server's certificate chain and key; CA is
	// the bundle it verifies clients with, and this package's PING
	// verifies the server with (its name 127.0.0.1).
	Cert, Key, CA string
	// ClientCert and ClientKey, when set, make the server require
	// client certificates (tls-auth-clients yes); PING shows them.
	// Without them client certificates are optional.
	ClientCert, ClientKey string
}

// Start starts a redis-server on a free port of 127.0.0.1 and waits until
// it answers PING.
func Start() (*Server, error) { return StartWith(Options{}) }

// StartWith starts a redis-server with opts on a free port of 127.0.0.1
// and waits until it answers PING.
func StartWith(opts Options) (*Server, error) {
	path, err := Path()
	if err != nil {
		return nil, err
	}
	var tc *tls.Config
	if opts.TLS != nil {
		if tc, err = opts.TLS.client(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "sluice-redis-")
	if err != nil {
		return nil, err
	}
	var last error
	for range 5 { // a port picked free can be taken before the server binds it
		port, err := FreePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), path: path, dir: dir, port: port, opts: opts, tls: tc}
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, last
}

// ForTest starts a server for t and stops it when t ends. Without
// redis-server it skips t, or fails it when RequireEnv is set.
func ForTest(t testkit.TB) *Server {
	t.Helper()
	return ForTestWith(t, Options{})
}

// ForTestWith is ForTest with opts.
func ForTestWith(t testkit.TB, opts Options) *Server {
	t.Helper()
	if _, err := Path(); err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("%v (%s is set: this run needs it)", err, RequireEnv)
		}
		t.Skipf("%v; skipping", err)
	}
	s, err := StartWith(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping redis-server: %v", err)
		}
	})
	return s
}

// FreePort returns a TCP port of 127.0.0.1 that was free when it was
// asked for (the kernel's choice for port 0), for a process the caller
// starts next: another process may take it in between.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct ports as FreePort does: all n are held
// open until each is known, as two calls of FreePort may return the
// same port (the kernel may hand a port just closed out again).
func FreePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// client returns the TLS configuration of PING.
func (f *TLSFiles) client() (*tls.Config, error) {
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("localredis: %s holds no PEM certificate", f.CA)
	}
	c := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if f.ClientCert != "" {
		pair, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// args returns the command line of the server on s.port.
func (s *Server) args() []string {
	port := strconv.Itoa(s.port)
	args := []string{"--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", filepath.Join(s.dir, "redis.log")}
	if f := s.opts.TLS; f == nil {
		args = append(args, "--port", port)
	} else {
		auth := "optional"
		if f.ClientCert != "" {
			auth = "yes"
		}
		args = append(args, "--port", "0", "--tls-port", port, "--tls-cert-file", f.Cert, "--tls-key-file", f.Key,
			"--tls-ca-cert-file", f.CA, "--tls-auth-clients", auth)
		if s.opts.Cluster {
			args = append(args, "--tls-cluster", "yes")
		}
	}
	for _, u := range s.opts.Users {
		args = append(append(args, "--user"), strings.Fields(u)...)
	}
	if s.opts.Cluster {
		// The cluster bus listens on port+10000: a free port below 55536
		// is needed, which FreePort's range (Linux: 32768–60999) mostly
		// gives; start retries another port otherwise.
		// A lone node never learns its address from a peer: announce it,
		// or CLUSTER SLOTS names the node by an empty host.
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.dir, "nodes-"+port+".conf"),
			"--cluster-announce-ip", "127.0.0.1")
	}
	return args
}

// start runs the process on s.port and waits for PONG (and, for a
// cluster, for its slots).
func (s *Server) start() error {
	if s.opts.Cluster && s.port+10000 > 65535 {
		return fmt.Errorf("port %d leaves no cluster bus port", s.port)
	}
	cmd := exec.Command(s.path, s.args()...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited at start (see %s)", s.port, filepath.Join(s.dir, "redis.log"))
		default:
		}
		if s.ping() == nil {
			if s.opts.Cluster {
				return s.clusterUp(deadline)
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-done
	return fmt.Errorf("redis-server on port %d did not answer PING within %v", s.port, startTimeout)
}

// ping sends PING and expects +PONG, or NOAUTH from a server whose
// default user is off.
func (s *Server) ping() error {
	line, err := s.command("PING")
	if err != nil {
		return err
	}
	if line != "+PONG" && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// command sends one inline command (as the default user) on a new
// connection and returns the first line of the answer.
func (s *Server) command(cmd string) (string, error) {
	c, br, err := s.send(cmd)
	if err != nil {
		return "", err
	}
	defer c.Close()
	line, err := br.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// send sends cmd on a new connection (TLS with Options.TLS), bounded by
// a second, and returns the connection and its reader.
func (s *Server) send(cmd string) (net.Conn, *bufio.Reader, error) {
	d := &net.Dialer{Timeout: time.Second}
	var c net.Conn
	var err error
	if s.tls != nil {
		c, err = tls.DialWithDialer(d, "tcp", s.Addr, s.tls)
	} else {
		c, err = d.Dial("tcp", s.Addr)
	}
	if err != nil {
		return nil, nil, err
	}
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, bufio.NewReader(c), nil
}

// clusterUp gives a new one-node cluster every slot and waits until
// CLUSTER INFO says cluster_state:ok.
func (s *Server) clusterUp(deadline time.Time) error {
	if line, err := s.command("CLUSTER ADDSLOTSRANGE 0 16383"); err != nil || line != "+OK" {
		return fmt.Errorf("redis-server on port %d: CLUSTER ADDSLOTSRANGE: %q %v", s.port, line, err)
	}
	for time.Now().Before(deadline) {
		if info, err := s.clusterInfo(); err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on port %d: the cluster did not reach state ok within %v", s.port, startTimeout)
}

// clusterInfo returns the body of CLUSTER INFO.
func (s *Server) clusterInfo() (string, error) {
	c, br, err := s.send("CLUSTER INFO")
	if err != nil {
		return "", err
	}
	defer c.Close()
	head, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		return "", fmt.Errorf("CLUSTER INFO answered %q", head)
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || n < 0 {
		return "", fmt.Errorf("CLUSTER INFO answered %q", head)
	}
	body := make([]byte, n)
	_, err = io.ReadFull(br, body)
	return string(body), err
}

// PID returns the process id of the running server (0 when stopped).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// signal sends sig to the server's process and, for a stopping signal,
// waits for it to exit (killing it after 5 s).
func (s *Server) signal(sig syscall.Signal, wait bool) error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	if wait {
		s.cmd = nil
	}
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	if !wait {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("redis-server (pid %d) did not exit on %v; killed", cmd.Process.Pid, sig)
	}
}

// Kill stops the server at once (SIGKILL), as a crash would; its data
// is lost. Restart brings it back on the same address.
func (s *Server) Kill() error { return s.signal(syscall.SIGKILL, true) }

// Pause freezes the server (SIGSTOP): connections stay open but nothing
// is answered, as with a Redis that is overloaded. Resume undoes it.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP, false) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT, false) }

// Restart starts a stopped server again on the same address, empty.
func (s *Server) Restart() error {
	if s.PID() != 0 {
		return errors.New("redis-server is still running")
	}
	return s.start()
}

// Stop stops the server (SIGTERM, then SIGKILL after 5 s) and removes its
// directory.
func (s *Server) Stop() error {
	_ = s.signal(syscall.SIGCONT, false) // a paused server cannot act on SIGTERM
	err := s.signal(syscall.SIGTERM, true)
	return errors.Join(err, os.RemoveAll(s.dir))
}
