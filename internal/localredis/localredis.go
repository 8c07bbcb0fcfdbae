// Package localredis runs a throwaway redis-server for tests and
// experiments (cluster mode's own tests in this module, the lab's cluster
// figures): Debian's redis-server binary on a free loopback port,
// with its files in a temporary directory and no persistence, stopped by
// its process id. Nothing here is for production.
package localredis

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
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

// Start starts a redis-server on a free port of 127.0.0.1 and waits until
// it answers PING.
func Start() (*Server, error) {
	path, err := Path()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-redis-")
	if err != nil {
		return nil, err
	}
	var last error
	for range 5 { // a port picked free can be taken before the server binds it
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), path: path, dir: dir, port: port}
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, last
}

// TB is the part of testing.TB that ForTest uses; *testing.T and
// *testing.B satisfy it. (It is declared here so that this package does
// not import testing.)
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

// ForTest starts a server for t and stops it when t ends. Without
// redis-server it skips t, or fails it when RequireEnv is set.
func ForTest(t TB) *Server {
	t.Helper()
	if _, err := Path(); err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("%v (%s is set: this run needs it)", err, RequireEnv)
		}
		t.Skipf("%v; skipping", err)
	}
	s, err := Start()
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

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start runs the process on s.port and waits for PONG.
func (s *Server) start() error {
	cmd := exec.Command(s.path,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"))
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
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-done
	return fmt.Errorf("redis-server on port %d did not answer PING within %v", s.port, startTimeout)
}

// ping sends PING and expects +PONG.
func (s *Server) ping() error {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
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
