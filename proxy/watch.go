// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"crypto/sha256"
	"maps"
	"os"
	"time"

	"github.com/sluicehq/sluice/internal/secret"
)

// watchIdle is how often the watch loop looks at watch_config again while
// it is 0 (off), so that a reload that turns it on takes effect.
const watchIdle = time.Second

// watchStep reads the configuration file once and reloads it when its
// content differs from what the last reload or step read, or when a
// secret file it names (admin.token_file, telemetry.otlp.headers_file,
// ...) differs from what that reload read. It reports whether it tried a
// reload, and that reload's error.
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
	secrets := maps.Clone(s.secretSums)
	s.watchMu.Unlock()
	if same && !secretsChanged(secrets) {
		return false, nil
	}
	return true, s.reloadData(data)
}

// digestOf is the digest a secret file is remembered by: of its content,
// or of the error that reading it gave.
func digestOf(b []byte, err error) [sha256.Size]byte {
	if err != nil {
		return sha256.Sum256([]byte("\x01" + err.Error()))
	}
	return sha256.Sum256(append([]byte{0}, b...))
}

// secretsChanged reports whether a secret file's digest differs from
// the one in sums (name → digest).
func secretsChanged(sums map[string][sha256.Size]byte) bool {
	for name, sum := range sums {
		if digestOf(os.ReadFile(name)) != sum {
			return true
		}
	}
	return false
}

// parseFile parses data, the configuration file's content, reading the
// secret files it names, and remembers each file's digest as read for
// the watch: after a valid file, those files' only; after an invalid
// one, those too (the running configuration's stay watched).
func (s *Server) parseFile(data []byte) (*Config, error) {
	sums := map[string][sha256.Size]byte{}
	cfg, err := parse(s.file, data, func(name string) ([]byte, error) {
		b, err := os.ReadFile(name)
		sums[name] = digestOf(b, err)
		return b, err
	})
	s.watchMu.Lock()
	if err != nil {
		maps.Copy(s.secretSums, sums)
	} else {
		s.secretSums = sums
	}
	s.watchMu.Unlock()
	return cfg, err
}

// watchSecretsOf starts watching the secret files of cfg, the
// configuration the server started with, as they are now.
func (s *Server) watchSecretsOf(cfg *Config) {
	sums := map[string][sha256.Size]byte{}
	for _, name := range secret.Files(cfg) {
		sums[name] = digestOf(os.ReadFile(name))
	}
	s.watchMu.Lock()
	if s.secretSums == nil {
		s.secretSums = sums
	}
	s.watchMu.Unlock()
}

// watchBaseline takes the file the server started with, and its secret
// files as they are now, as the watch's baseline: a first step must not
// reload a configuration that is already running. Serve calls it before
// it starts runWatch, so that a file changed from then on is seen.
func (s *Server) watchBaseline() {
	s.watchSecretsOf(s.h.gen.Load().cfg)
	if data, err := os.ReadFile(s.file); err == nil {
		s.watchMu.Lock()
		if s.fileSum == ([sha256.Size]byte{}) {
			s.fileSum = sha256.Sum256(data)
		}
		s.watchMu.Unlock()
	}
}

// runWatch runs watchStep every watch_config (read from the running
// configuration each time) until ctx ends; watchBaseline has run.
func (s *Server) runWatch(ctx context.Context) {
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
