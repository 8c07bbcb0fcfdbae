package proxy

import (
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// watchIdle is how often the watch loop looks at watch_config again while
// it is 0 (off), so that a reload that turns it on takes effect.
const watchIdle = time.Second

// watchStep reads the configuration file once and reloads it when its
// content differs from what the last reload or step read. It reports
// whether it tried a reload, and that reload's error.
//
// A Kubernetes ConfigMap volume changes by an atomic swap of its ..data
// symlink: the file's path stays, its content changes, and no inotify
// event names the file itself; comparing a digest of the content at each
// step sees every such swap, and an in-place edit as well. A file read
// half-written fails to parse and keeps the running configuration; the
// next step, seeing the completed content, reloads it.
func (s *Server) watchStep() (tried bool, err error) {
	data, err := os.ReadFile(s.file)
	if err != nil {
		return false, err // a swap in progress or a removed file: keep what runs
	}
	sum := sha256.Sum256(data)
	s.watchMu.Lock()
	same := sum == s.fileSum
	s.watchMu.Unlock()
	if same {
		return false, nil
	}
	return true, s.reloadData(data)
}

// runWatch runs watchStep every watch_config (read from the running
// configuration each time) until ctx ends.
func (s *Server) runWatch(ctx context.Context) {
	// The file the server started with is the baseline: a first step must
	// not reload a configuration that is already running.
	if data, err := os.ReadFile(s.file); err == nil {
		s.watchMu.Lock()
		if s.fileSum == ([sha256.Size]byte{}) {
			s.fileSum = sha256.Sum256(data)
		}
		s.watchMu.Unlock()
	}
	for {
		every := s.h.gen.Load().cfg.WatchConfig
		wait := every
		if wait <= 0 {
			wait = watchIdle
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if every <= 0 {
			continue
		}
		if tried, err := s.watchStep(); tried {
			if err != nil {
				s.log.Error("config file changed but the reload was refused; the running configuration stays", "file", s.file, "err", err)
			} else {
				s.log.Info("config file changed: reloaded", "file", s.file, "version", s.h.gen.Load().version)
			}
		}
	}
}
