// SPDX-License-Identifier: Apache-2.0

package reliability

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ChildFDLimit, when > 0, is the file-descriptor limit (ulimit -n) of
// the processes under test.
var ChildFDLimit int

// Proc is a proxy under test running as its own process: sluice or
// nginx.
type Proc struct {
	Name  string
	Addr  string // client listener, host:port
	Admin string // sluice's admin API, http://host:port ("" for nginx)
	cmd   *exec.Cmd
	dir   string
	log   *os.File
	env   []string // added to the environment
}

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// StartSluice runs bin ("sluice proxy") listening on a free port in
// front of backend, with the quick start's flags plus args (such as
// "--controller seda --target-p90 200ms") or, when config is not empty,
// with that configuration text (ADDR, ADMIN and BACKEND replaced). Its
// log goes to dir.
func StartSluice(bin, dir, backend string, args []string, config string) (*Proc, error) {
	return StartSluiceEnv(bin, dir, backend, args, config, nil)
}

// StartSluiceEnv is StartSluice with env added to the process's
// environment (such as TMPDIR, for its temporary files).
func StartSluiceEnv(bin, dir, backend string, args []string, config string, env []string) (*Proc, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	argv := []string{"proxy", "--log-level", "warn"}
	if config != "" {
		f := filepath.Join(dir, "sluice.yaml")
		r := strings.NewReplacer("ADDR", addr, "ADMIN", admin, "BACKEND", backend)
		if err := os.WriteFile(f, []byte(r.Replace(config)), 0o644); err != nil {
			return nil, err
		}
		argv = append(argv, "--config", f)
	} else {
		argv = append(argv, "--listen", addr, "--backend", backend, "--admin", admin)
		argv = append(argv, args...)
	}
	p := &Proc{Name: "sluice", Addr: addr, Admin: "http://" + admin, dir: dir, env: env}
	return p, p.start(bin, argv, "http://"+admin+"/state")
}

// NginxConfig is nginx 1.22 as Debian configures it (worker_connections
// 768, keepalive_timeout 65s, the compiled-in client limits) proxying to
// BACKEND; PREFIX and ADDR are replaced.
const NginxConfig = `worker_processes auto;
daemon off;
user root;
pid PREFIX/nginx.pid;
error_log PREFIX/error.log warn;
events { worker_connections 768; }
http {
	access_log off;
	sendfile on;
	keepalive_timeout 65;
	client_body_temp_path PREFIX/client_body;
	proxy_temp_path PREFIX/proxy;
	fastcgi_temp_path PREFIX/fastcgi;
	uwsgi_temp_path PREFIX/uwsgi;
	scgi_temp_path PREFIX/scgi;
	server {
		listen ADDR;
		location / { proxy_pass BACKEND; }
	}
}
`

// StartNginx runs nginx (found on PATH or in /usr/sbin) with
// NginxConfig in dir.
func StartNginx(dir, backend string) (*Proc, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			return nil, fmt.Errorf("nginx not found: %w", err)
		}
		bin = "/usr/sbin/nginx"
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	conf := strings.NewReplacer("PREFIX", dir, "ADDR", addr, "BACKEND", backend).Replace(NginxConfig)
	f := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(f, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	p := &Proc{Name: "nginx", Addr: addr, dir: dir}
	return p, p.start(bin, []string{"-p", dir, "-c", f}, "")
}

// start runs the process and waits until its listener (and ready URL,
// if any) answers.
func (p *Proc) start(bin string, argv []string, ready string) error {
	log, err := os.Create(filepath.Join(p.dir, p.Name+".log"))
	if err != nil {
		return err
	}
	p.log = log
	if ChildFDLimit > 0 {
		// The process under test gets its own file-descriptor limit, not
		// the harness's raised one.
		argv = append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, ChildFDLimit), bin}, argv...)
		bin = "/bin/sh"
	}
	p.cmd = exec.Command(bin, argv...)
	if len(p.env) > 0 {
		p.cmd.Env = append(os.Environ(), p.env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(log.Name())
			return &ExitError{Name: p.Name, Err: err, Log: string(b)}
		default:
		}
		c, err := net.DialTimeout("tcp", p.Addr, time.Second)
		if err == nil {
			c.Close()
			if ready == "" {
				break
			}
			if resp, err := http.Get(ready); err == nil {
				resp.Body.Close()
				break
			}
		}
		if time.Now().After(deadline) {
			p.Stop()
			return fmt.Errorf("%s did not start listening on %s", p.Name, p.Addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	go func() { <-exited }()
	return nil
}

// ExitError is a process under test that exited at start.
type ExitError struct {
	Name string
	Err  error
	Log  string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("%s exited at start (%v): %s", e.Name, e.Err, strings.TrimSpace(e.Log))
}

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (p *Proc) Stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for {
			if err := p.cmd.Process.Signal(syscall.Signal(0)); err != nil {
				close(done)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
	}
	if p.log != nil {
		p.log.Close()
	}
}

// Metric reads one unlabelled sample from sluice's /metrics.
func (p *Proc) Metric(name string) (float64, error) {
	if p.Admin == "" {
		return 0, errors.New("no admin API")
	}
	resp, err := http.Get(p.Admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, name+" ") {
			return strconv.ParseFloat(strings.TrimSpace(l[len(name):]), 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found", name)
}

// RSS returns the process's resident set size in bytes, from /proc (for
// nginx, the sum over its master and workers).
func (p *Proc) RSS() (int64, error) {
	pids := []int{p.Pid()}
	if p.Name == "nginx" {
		if kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.Pid(), p.Pid())); err == nil {
			for _, f := range strings.Fields(string(kids)) {
				if n, err := strconv.Atoi(f); err == nil {
					pids = append(pids, n)
				}
			}
		}
	}
	var total int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			return 0, errors.New("short statm")
		}
		pages, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, err
		}
		total += pages * int64(os.Getpagesize())
	}
	return total, nil
}

// SiteBackend serves "/" as a small page and "/big" as 256 KiB with
// Range support (for the slow-read and range attacks), on 127.0.0.1.
type SiteBackend struct {
	URL string
	srv *http.Server
}

// NewSiteBackend starts a SiteBackend.
func NewSiteBackend() (*SiteBackend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	big := strings.NewReader(strings.Repeat("0123456789abcdef", 16<<10))
	mod := time.Unix(1_700_000_000, 0)
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "big.txt", mod, io.NewSectionReader(big, 0, big.Size()))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok\n")
	})
	b := &SiteBackend{URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

// Close stops the backend.
func (b *SiteBackend) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.srv.Shutdown(ctx)
}
