// SPDX-License-Identifier: Apache-2.0

package tlsconf

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/ctxsleep"
)

// Watch keeps the configuration of one TLS setting (a listener's, the
// admin listener's, the upstream one) in step with its files. The
// configuration in service sits behind an atomic pointer that every
// handshake reads (tls.Config.GetConfigForClient on a listener, the
// upstream dialer); Check replaces it when the files' contents change.
// Open connections keep the configuration of their handshake.
//
// Check is the step, with the time as an argument; Run is the live loop
// that calls it every period. A Watch is safe for concurrent use.
type Watch struct {
	source string        // the setting's path: "listeners[0].tls"
	files  []tlsFile     // what it reads
	period time.Duration // Run's period; 0: Run only waits for ctx
	build  tlsBuild
	cur    atomic.Pointer[tls.Config]

	log *slog.Logger // nil: discarded
	m   *Metrics     // nil: none

	mu      sync.Mutex // serialises Check
	sum     [sha256.Size]byte
	failed  [sha256.Size]byte // the last contents refused, warned about once
	failErr error             // why
	readErr string            // the last read error, warned about once
	loaded  time.Time         // when the contents in service were loaded (a Check's now)
}

// newWatch returns a watch serving conf, built from files whose
// digest is sum, at now.
func newWatch(source string, files []tlsFile, period time.Duration, conf *tls.Config, sum [sha256.Size]byte,
	build tlsBuild, now time.Time) *Watch {
	w := &Watch{source: source, files: files, period: period, build: build, sum: sum, loaded: now}
	w.cur.Store(conf)
	return w
}

// Config returns the configuration in service.
func (w *Watch) Config() *tls.Config { return w.cur.Load() }

// SetOutputs sets where Check reports (before the watch is used), and
// reports the certificates in service.
func (w *Watch) SetOutputs(log *slog.Logger, m *Metrics) {
	w.log, w.m = log, m
	w.m.served(w.source, w.files, w.cur.Load())
}

// Check reads the files at now. When their contents differ from those in
// service it builds a configuration from them and puts it in service,
// reporting changed; contents that do not build keep the configuration
// in service, and err says why (a warning names the file, once per
// distinct contents, and sluice_tls_reloads_total{result="error"}
// counts it). A file that cannot be read (a swap in progress, a removed
// file) keeps the configuration in service the same way.
func (w *Watch) Check(now time.Time) (changed bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, sum, err := readTLSFiles(w.files)
	if err != nil {
		if msg := err.Error(); msg != w.readErr {
			w.readErr = msg
			w.warn("TLS files cannot be read: the certificates in service stay", err)
			w.m.reload(w.source, false)
		}
		return false, err
	}
	w.readErr = ""
	if sum == w.sum {
		return false, nil
	}
	if sum == w.failed {
		return false, w.failErr // warned already
	}
	conf, err := w.build(data)
	if err != nil {
		w.failed, w.failErr = sum, err
		w.warn("new TLS files refused: the certificates in service stay", err)
		w.m.reload(w.source, false)
		return false, err
	}
	w.sum, w.failed, w.failErr, w.loaded = sum, [sha256.Size]byte{}, nil, now
	w.cur.Store(conf)
	w.m.reload(w.source, true)
	w.m.served(w.source, w.files, conf)
	if w.log != nil {
		w.log.Info("TLS files changed: new handshakes use them", "tls", w.source)
	}
	return true, nil
}

func (w *Watch) warn(msg string, err error) {
	if w.log != nil {
		// err names the field and the file (fileErr), never their bytes.
		w.log.Warn(msg, "tls", w.source, "err", err)
	}
}

// Run calls Check every period until ctx ends; with period 0 (the
// setting not watched) it returns at once.
func (w *Watch) Run(ctx context.Context) {
	if w.period <= 0 {
		return
	}
	ctxsleep.Every(ctx, w.period, func(now time.Time) { _, _ = w.Check(now) })
}

// Metrics are the TLS settings' metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	reloads *prometheus.CounterVec // {source, result}
	expiry  *prometheus.GaugeVec   // {source, cert}
}

// NewMetrics returns the metrics sluice_tls_reloads_total and
// sluice_tls_certificate_expiration_timestamp_seconds, to register once.
func NewMetrics() *Metrics {
	return &Metrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_tls_reloads_total",
			Help: "Changed TLS files of a TLS setting (source: its configuration path), put in service (result ok) or refused (error: the certificates in service stay)."},
			[]string{"source", "result"}),
		expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_tls_certificate_expiration_timestamp_seconds",
			Help: "End of validity (NotAfter, Unix seconds) of each certificate in service, by TLS setting and certificate file."},
			[]string{"source", "cert"}),
	}
}

// Register registers m's collectors with reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.reloads, m.expiry} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) reload(source string, ok bool) {
	if m == nil {
		return
	}
	result := "ok"
	if !ok {
		result = "error"
	}
	m.reloads.WithLabelValues(source, result).Inc()
}

// served records the expiry of conf's certificates, whose chain files
// are files' every other one (cert, key, cert, key, ...).
func (m *Metrics) served(source string, files []tlsFile, conf *tls.Config) {
	if m == nil || conf == nil {
		return
	}
	var certFiles []string
	for _, f := range files {
		if strings.HasSuffix(f.field, ".cert") {
			certFiles = append(certFiles, f.name)
		}
	}
	for i, c := range conf.Certificates {
		if i < len(certFiles) && c.Leaf != nil {
			m.expiry.WithLabelValues(source, certFiles[i]).Set(float64(c.Leaf.NotAfter.Unix()))
		}
	}
}
