// SPDX-License-Identifier: Apache-2.0

package tlsconf

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/testcert"
)

// serverLeaf is a server certificate for loopback listeners.
func serverLeaf(t *testing.T, ca *testcert.CA, cn string) *testcert.Pair {
	return ca.Issue(t, testcert.Leaf{CommonName: cn, DNSNames: []string{"localhost"}, IPs: []string{"127.0.0.1"}})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The watch's step, driven with its time argument: nothing changes while
// the files do not; a kubelet-style swap puts the new certificate in
// service at the next step; a broken new version keeps the certificate
// in service, is logged once naming the file and never its bytes, and is
// counted; the fixed version is served.
func TestTLSWatchCheck(t *testing.T) {
	ca := testcert.NewCA(t, "CA")
	d := testcert.NewSecretDir(t)
	p1 := serverLeaf(t, ca, "one")
	d.UpdatePair(p1, nil)
	cfg := &Config{Cert: d.Path("tls.crt"), Key: d.Path("tls.key")}
	cfg.SetDefaults()
	t0 := time.Unix(1_700_000_000, 0)
	w, err := NewServerWatch("listeners[0].tls", cfg, t0)
	must(t, err)
	var logs bytes.Buffer
	m := NewMetrics()
	w.SetOutputs(slog.New(slog.NewTextHandler(&logs, nil)), m)
	reg := prometheus.NewRegistry()
	must(t, m.Register(reg))
	served := func() string { return w.Config().Certificates[0].Leaf.Subject.CommonName }

	if changed, err := w.Check(t0.Add(10 * time.Second)); changed || err != nil || served() != "one" {
		t.Fatalf("unchanged files: changed %v, err %v, served %s", changed, err, served())
	}
	p2 := serverLeaf(t, ca, "two")
	d.UpdatePair(p2, nil)
	if changed, err := w.Check(t0.Add(20 * time.Second)); !changed || err != nil || served() != "two" {
		t.Fatalf("after the swap: changed %v, err %v, served %s", changed, err, served())
	}
	if !w.loaded.Equal(t0.Add(20 * time.Second)) {
		t.Errorf("loaded at %v, want the step's time", w.loaded)
	}

	bad := serverLeaf(t, ca, "three")
	d.Update(map[string][]byte{"tls.crt": bad.CertPEM, "tls.key": p1.KeyPEM}) // the key of another certificate
	for i := range 3 {
		changed, err := w.Check(t0.Add(time.Duration(30+10*i) * time.Second))
		if changed || err == nil || fielderr.Path(err) != "listeners[0].tls.key" || served() != "two" {
			t.Fatalf("broken version, step %d: changed %v, err %v, served %s", i, changed, err, served())
		}
	}
	if n := strings.Count(logs.String(), "new TLS files refused"); n != 1 {
		t.Errorf("%d warnings for one broken version, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), d.Path("tls.key")) {
		t.Errorf("the warning does not name the file:\n%s", logs.String())
	}
	for _, k := range [][]byte{p1.KeyPEM, bad.KeyPEM} {
		if line := bytes.Split(k, []byte("\n"))[1]; bytes.Contains(logs.Bytes(), line[:20]) {
			t.Fatalf("a key's bytes were logged:\n%s", logs.String())
		}
	}
	d.UpdatePair(bad, nil)
	if changed, err := w.Check(t0.Add(time.Minute)); !changed || err != nil || served() != "three" {
		t.Fatalf("fixed version: changed %v, err %v, served %s", changed, err, served())
	}
	text := gatherText(t, reg)
	for _, want := range []string{`sluice_tls_reloads_total{result="ok",source="listeners[0].tls"} 2`,
		`sluice_tls_reloads_total{result="error",source="listeners[0].tls"} 1`} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s in\n%s", want, text)
		}
	}
}

// gatherText gathers reg as "name{labels} value" lines.
func gatherText(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			fmt.Fprintf(&b, "%s{%s} %v\n", mf.GetName(), strings.Join(ls, ","), v)
		}
	}
	return b.String()
}

// The live loop, in virtual time: a swapped certificate is in service
// one watch period after the swap at the latest, and not before the
// period's tick.
func TestTLSWatchRunServesWithinOnePeriod(t *testing.T) {
	ca := testcert.NewCA(t, "CA")
	p1, p2 := serverLeaf(t, ca, "one"), serverLeaf(t, ca, "two")
	d := testcert.NewSecretDir(t)
	d.UpdatePair(p1, nil)
	synctest.Test(t, func(t *testing.T) {
		period := 10 * time.Second
		cfg := &Config{Cert: d.Path("tls.crt"), Key: d.Path("tls.key"), Watch: &period}
		cfg.SetDefaults()
		w, err := NewServerWatch("listeners[0].tls", cfg, time.Now())
		must(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		time.Sleep(3 * time.Second) // the swap lands mid-period
		d.UpdatePair(p2, nil)
		swapped := time.Now()
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if cn := w.Config().Certificates[0].Leaf.Subject.CommonName; cn != "one" {
			t.Fatalf("served %s before the period's tick", cn)
		}
		time.Sleep(period - 6*time.Second)
		synctest.Wait()
		if cn := w.Config().Certificates[0].Leaf.Subject.CommonName; cn != "two" || time.Since(swapped) > period {
			t.Fatalf("served %s %v after the swap (period %v)", cn, time.Since(swapped), period)
		}
		cancel()
		<-done
	})
}
