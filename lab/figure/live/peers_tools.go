// SPDX-License-Identifier: Apache-2.0

package live

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// peerTool is an external program the experiment runs and the Debian
// package that provides it.
type peerTool struct{ name, pkg string }

var peerTools = []peerTool{{"nginx", "nginx"}, {"haproxy", "haproxy"}}

// peerSbinDirs are searched after PATH, which often lacks the sbin
// directories for ordinary users.
var peerSbinDirs = []string{"/usr/sbin", "/usr/local/sbin", "/sbin"}

// findPeerTool returns the path of the named program: lookPath(name)
// (PATH), else the first of dirs/name that lookPath accepts.
func findPeerTool(name string, lookPath func(string) (string, error), dirs []string) (string, bool) {
	if p, err := lookPath(name); err == nil {
		return p, true
	}
	for _, d := range dirs {
		if p, err := lookPath(filepath.Join(d, name)); err == nil {
			return p, true
		}
	}
	return "", false
}

// planPeerInstall decides what to do about missing programs: nothing when
// none is missing; as root (euid 0) with apt-get (its path, "" when
// absent), the apt-get commands to run; otherwise an error saying exactly
// how to install them.
func planPeerInstall(missing []peerTool, euid int, aptGet string) ([][]string, error) {
	if len(missing) == 0 {
		return nil, nil
	}
	var names, pkgs []string
	for _, t := range missing {
		names = append(names, t.name)
		if !slices.Contains(pkgs, t.pkg) {
			pkgs = append(pkgs, t.pkg)
		}
	}
	what := fmt.Sprintf("the peers experiment runs %s, not found in PATH or %s", strings.Join(names, " and "), strings.Join(peerSbinDirs, ", "))
	if aptGet == "" {
		return nil, fmt.Errorf("%s, and apt-get is not available to install them: install the packages providing %s with this system's package manager (on Debian and Ubuntu: apt-get install -y %s) and run the experiment again",
			what, strings.Join(names, " and "), strings.Join(pkgs, " "))
	}
	if euid != 0 {
		return nil, fmt.Errorf("%s; install them with\n    sudo apt-get update && sudo apt-get install -y %s\nand run the experiment again (run as root, it installs them itself)",
			what, strings.Join(pkgs, " "))
	}
	install := []string{aptGet, "install", "-y", "-q", "--no-install-recommends",
		"-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}
	return [][]string{{aptGet, "update", "-q"}, append(install, pkgs...)}, nil
}

// ensurePeerTools finds nginx and haproxy, installing them first when
// planPeerInstall says so, and returns their paths by name.
func ensurePeerTools(ctx context.Context, env *Env) (map[string]string, error) {
	find := func() (map[string]string, []peerTool) {
		found := map[string]string{}
		var missing []peerTool
		for _, t := range peerTools {
			if p, ok := findPeerTool(t.name, exec.LookPath, peerSbinDirs); ok {
				found[t.name] = p
			} else {
				missing = append(missing, t)
			}
		}
		return found, missing
	}
	found, missing := find()
	if len(missing) == 0 {
		return found, nil
	}
	aptGet, _ := findPeerTool("apt-get", exec.LookPath, []string{"/usr/bin", "/bin"})
	cmds, err := planPeerInstall(missing, os.Geteuid(), aptGet)
	if err != nil {
		return nil, err
	}
	for _, argv := range cmds {
		if err := runInstallStep(ctx, env, argv); err != nil {
			return nil, err
		}
	}
	found, missing = find()
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s still not found in PATH or %s after installing", missing[0].name, strings.Join(peerSbinDirs, ", "))
	}
	return found, nil
}

// runInstallStep runs one apt-get command non-interactively, at most
// peersInstallTimeout, with a progress line every 10 s.
func runInstallStep(ctx context.Context, env *Env, argv []string) error {
	env.Phasef("installing: %s (non-interactive, at most %v)", strings.Join(argv, " "), peersInstallTimeout)
	ictx, cancel := context.WithTimeout(ctx, peersInstallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ictx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "APT_LISTCHANGES_FRONTEND=none")
	out := newTailBuffer(8 << 10)
	cmd.Stdout, cmd.Stderr = out, out
	// Interrupt apt-get first: killing it in the middle of dpkg leaves the
	// package database locked.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	start := time.Now()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", argv[0], err)
	}
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("%s failed after %v: %w; its last output:\n%s", strings.Join(argv, " "),
					time.Since(start).Round(time.Second), err, out.String())
			}
			env.Logf("done in %v", time.Since(start).Round(100*time.Millisecond))
			return nil
		case <-tick.C:
			env.Logf("still running (%v): %s", time.Since(start).Round(time.Second), lastLine(out.String()))
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// tailBuffer keeps the last max bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

// Write appends p, dropping the oldest bytes beyond the limit. It never
// fails.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String returns the bytes kept.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// peerVersion returns the first line a program prints for its version
// flag ("" if it fails).
func peerVersion(ctx context.Context, argv ...string) string {
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(vctx, argv[0], argv[1:]...).CombinedOutput()
	return strings.TrimSpace(string(out))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
