// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testcert"
)

// mountedFile is a file in a directory laid out the way kubelet mounts
// a ConfigMap or Secret volume (testcert.SecretDir): an update swaps in a
// new version atomically, at the same path.
type mountedFile struct {
	dir  *testcert.SecretDir
	name string
}

func newMountedFile(t *testing.T, name, content string) mountedFile {
	f := mountedFile{testcert.NewSecretDir(t), name}
	f.update(content)
	return f
}

func (f mountedFile) path() string { return f.dir.Path(f.name) }

// update swaps in a new version of the volume holding content.
func (f mountedFile) update(content string) {
	f.dir.Update(map[string][]byte{f.name: []byte(content)})
}

func TestWatchConfigFollowsConfigMapSwap(t *testing.T) {
	be := backend(t, nil)
	base := baseConfig(be.URL, "watch_config: 20ms\n")
	cm := newMountedFile(t, "sluice.yaml", base)
	file := cm.path()
	c, err := LoadFile(file)
	must(t, err)
	opts := testOptions(t)
	opts.ConfigFile = file
	srv, err := New(c, opts)
	must(t, err)
	must(t, srv.Listen())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()

	version := func() uint64 { return srv.h.gen.Load().version }
	// Nothing changed: no reload (the started file is the baseline).
	time.Sleep(100 * time.Millisecond)
	if v := version(); v != 1 {
		t.Fatalf("config version %d before any change, want 1", v)
	}
	cm.update(base + "shadow: true\n")
	eventually(t, "the swapped ConfigMap applied", func() bool { return version() == 2 && srv.Config().Shadow })

	// An invalid version keeps the running configuration, once.
	cm.update(base + "shadow: maybe\n")
	eventually(t, "the invalid version refused", func() bool {
		return strings.Contains(metricsOf(t, srv), `proxy_reloads_total{result="error"} 1`)
	})
	time.Sleep(100 * time.Millisecond)
	if v := version(); v != 2 || !strings.Contains(metricsOf(t, srv), `proxy_reloads_total{result="error"} 1`) {
		t.Fatalf("after an invalid version: config version %d (want 2), reload errors:\n%s", v, grepLines(metricsOf(t, srv), "proxy_reloads_total"))
	}
	// Fixed: applied.
	cm.update(base + "shadow: false\n")
	eventually(t, "the fixed ConfigMap applied", func() bool { return version() == 3 && !srv.Config().Shadow })
}

func TestWatchConfigOff(t *testing.T) {
	be := backend(t, nil)
	r := startProxy(t, baseConfig(be.URL, ""))
	must(t, os.WriteFile(r.file, []byte(baseConfig(be.URL, "shadow: true\n")), 0o644))
	time.Sleep(1500 * time.Millisecond) // more than watchIdle
	if v := r.srv.h.gen.Load().version; v != 1 {
		t.Fatalf("without watch_config the file was reloaded (version %d)", v)
	}
}

// metricsOf gathers srv's registry as text.
func metricsOf(t *testing.T, srv *Server) string {
	t.Helper()
	mfs, err := srv.gath.Gather()
	must(t, err)
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			b.WriteString(mf.GetName())
			if len(m.GetLabel()) > 0 {
				b.WriteString("{")
				for i, l := range m.GetLabel() {
					if i > 0 {
						b.WriteString(",")
					}
					fmt.Fprintf(&b, "%s=%q", l.GetName(), l.GetValue())
				}
				b.WriteString("}")
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			fmt.Fprintf(&b, " %g\n", v)
		}
	}
	return b.String()
}
