// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/testcert"
)

// serverLeaf is a server certificate for the proxy's loopback listeners.
func serverLeaf(t *testing.T, ca *testcert.CA, cn string, dns ...string) *testcert.Pair {
	return ca.Issue(t, testcert.Leaf{CommonName: cn, DNSNames: append(dns, "localhost"), IPs: []string{"127.0.0.1"}})
}

// servedLeaf completes a handshake with addr, sending sni, and returns
// the leaf certificate the server sent.
func servedLeaf(t *testing.T, addr, sni string, pool *x509.CertPool, certs ...tls.Certificate) *x509.Certificate {
	t.Helper()
	conf := &tls.Config{RootCAs: pool, ServerName: sni, Certificates: certs}
	if sni == "" {
		// No SNI: verify against the address, send none (crypto/tls
		// sends none for an IP address).
		conf.ServerName = "127.0.0.1"
	}
	c, err := tls.Dial("tcp", addr, conf)
	must(t, err)
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

// tlsConfigText is a listener config with tls (YAML flow mapping body).
func tlsConfigText(backendURL, tlsBody string) string {
	return withBackend(fmt.Sprintf(`listeners:
  - addr: 127.0.0.1:0
    tls: {%s}
admin: {addr: 127.0.0.1:0}
backends: {servers: [{url: BACKEND}]}
`, tlsBody), backendURL)
}

// errPath returns the field path of a configuration error.
func errPath(err error) string {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ce.Path
	}
	return fielderr.Path(err)
}

// parseText parses a config text as LoadFile does.
func parseText(t *testing.T, text string) (*Config, error) {
	t.Helper()
	return Parse("proxy.yaml", []byte(text))
}

func TestTLSConfigErrors(t *testing.T) {
	ca := testcert.NewCA(t, "CA")
	dir := t.TempDir()
	cert, key := serverLeaf(t, ca, "a").Write(t, dir, "a")
	_, otherKey := serverLeaf(t, ca, "b").Write(t, dir, "b")
	caFile := ca.WriteCA(t)
	junk := filepath.Join(dir, "junk.pem")
	must(t, os.WriteFile(junk, []byte("not a certificate"), 0o600))
	cases := []struct {
		tls, path, msg string
	}{
		{"", "listeners[0].tls", "needs a certificate"},
		{"cert: " + cert, "listeners[0].tls.key", "is required with cert"},
		{"key: " + key, "listeners[0].tls.cert", "is required with key"},
		{fmt.Sprintf("cert: %s, key: %s", cert, otherKey), "listeners[0].tls.key", "does not match"},
		{fmt.Sprintf("cert: %s, key: %s", junk, key), "listeners[0].tls.cert", "no PEM CERTIFICATE"},
		{fmt.Sprintf("cert: %s, key: %s", cert, filepath.Join(dir, "gone.key")), "listeners[0].tls.key", "cannot be read"},
		{fmt.Sprintf("cert: %s, key: %s, certificates: [{cert: %s}]", cert, key, cert), "listeners[0].tls.certificates[0].key", "is required with cert"},
		{fmt.Sprintf("cert: %s, key: %s, min_version: '1.1'", cert, key), "listeners[0].tls.min_version", "RFC 8996"},
		{fmt.Sprintf("cert: %s, key: %s, watch: -1s", cert, key), "listeners[0].tls.watch", "positive duration"},
		{fmt.Sprintf("cert: %s, key: %s, client_auth: require", cert, key), "listeners[0].tls.client_ca", "is required with client_auth require"},
		{fmt.Sprintf("cert: %s, key: %s, client_ca: %s, client_auth: none", cert, key, caFile), "listeners[0].tls.client_auth", "say request or require"},
		{fmt.Sprintf("cert: %s, key: %s, client_ca: %s, client_auth: maybe", cert, key, caFile), "listeners[0].tls.client_auth", "must be none, request or require"},
		{fmt.Sprintf("cert: %s, key: %s, client_ca: %s", cert, key, key), "listeners[0].tls.client_ca", "private key"},
	}
	for _, c := range cases {
		_, err := parseText(t, tlsConfigText("http://127.0.0.1:1", c.tls))
		if err == nil || errPath(err) != c.path || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("tls {%s}: got %v, want %s: …%s…", c.tls, err, c.path, c.msg)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY-----") {
			t.Errorf("an error quotes a key: %v", err)
		}
	}
	// Defaults: min_version 1.2, watch 10s, client_auth require with a CA.
	cfg, err := parseText(t, tlsConfigText("http://127.0.0.1:1", fmt.Sprintf("cert: %s, key: %s, client_ca: %s", cert, key, caFile)))
	must(t, err)
	if l := cfg.Listeners[0].TLS; l.MinVersion != "1.2" || *l.Watch != DefaultTLSWatch || l.ClientAuth != ClientAuthRequire {
		t.Errorf("defaults: %+v (watch %v)", l, *l.Watch)
	}
	// Keying on the certificate needs a listener that verifies one.
	_, err = parseText(t, tlsConfigText("http://127.0.0.1:1", fmt.Sprintf("cert: %s, key: %s", cert, key))+
		"stages: [{name: s, controller: auto, tenants: {fair: true, key: client-cert}}]\n")
	if errPath(err) != "stages[0].tenants.key" || !strings.Contains(err.Error(), "client_auth request or require") {
		t.Errorf("tenant key client-cert without client auth: %v", err)
	}
	_, err = parseText(t, baseConfig("http://127.0.0.1:1", "classes: {order: [a, b], rules: [{class: a, client_cert: {}}]}\n"))
	if errPath(err) != "classes.rules[0].client_cert" {
		t.Errorf("class rule client_cert on plaintext: %v", err)
	}
}

// Several certificates: the client's SNI picks the one whose names
// match (a wildcard too); an unknown name or none gets the first.
func TestSNIChoosesCertificate(t *testing.T) {
	be := backend(t, echoHeaders)
	ca := testcert.NewCA(t, "CA")
	dir := t.TempDir()
	defCert, defKey := serverLeaf(t, ca, "default").Write(t, dir, "default")
	aCert, aKey := ca.Issue(t, testcert.Leaf{CommonName: "a", DNSNames: []string{"a.example"}}).Write(t, dir, "a")
	wCert, wKey := ca.Issue(t, testcert.Leaf{CommonName: "wild", DNSNames: []string{"*.b.example"}}).Write(t, dir, "w")
	p := startProxy(t, tlsConfigText(be.URL, fmt.Sprintf("cert: %s, key: %s, certificates: [{cert: %s, key: %s}, {cert: %s, key: %s}]",
		defCert, defKey, aCert, aKey, wCert, wKey)))
	pool := ca.Pool()
	for sni, want := range map[string]string{"a.example": "a", "x.b.example": "wild", "localhost": "default", "": "default"} {
		if got := servedLeaf(t, p.addr, sni, pool).Subject.CommonName; got != want {
			t.Errorf("SNI %q: served %q, want %q", sni, got, want)
		}
	}
	// An unknown name gets the default, which the client then refuses.
	c, err := tls.Dial("tcp", p.addr, &tls.Config{RootCAs: pool, ServerName: "c.example"})
	if err == nil {
		c.Close()
		t.Fatal("a handshake for an unknown name verified")
	}
	if m := metricsOf(t, p.srv); !strings.Contains(m, `sluice_tls_certificate_expiration_timestamp_seconds{cert="`+aCert+`",source="listeners[0].tls"}`) {
		t.Errorf("expiry metric:\n%s", grepLines(m, "sluice_tls"))
	}
}

// A certificate rotated (kubelet's ..data swap) while clients hammer the
// listener over several connections, some kept alive and some new for
// each request: every request gets its answer, each rotation is served
// to the next handshake as soon as the watch's step ran, and a
// connection opened before the rotations keeps going on its own
// certificate.
func TestCertificateRotationUnderLoad(t *testing.T) {
	be := backend(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok "+r.URL.Path) })
	ca := testcert.NewCA(t, "CA")
	d := testcert.NewSecretDir(t)
	first := serverLeaf(t, ca, "gen-0")
	d.UpdatePair(first, ca)
	// watch 0s: the test drives the step (TestTLSWatchRunServesWithinOnePeriod
	// covers the live loop).
	p := startProxy(t, tlsConfigText(be.URL, fmt.Sprintf("cert: %s, key: %s, watch: 0s", d.Path("tls.crt"), d.Path("tls.key"))))
	watch := p.srv.tlsw[0]
	pool := ca.Pool()

	// The long-lived connection, opened on the first certificate.
	oldTr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 1}
	defer oldTr.CloseIdleConnections()
	old := &http.Client{Transport: oldTr, Timeout: testTimeout}
	getOn := func(c *http.Client, path string) (*http.Response, string, bool, error) {
		var reused bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+p.addr+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			return nil, "", false, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b), reused, err
	}
	if _, _, _, err := getOn(old, "/before"); err != nil {
		t.Fatal(err)
	}

	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: i%2 == 0, ForceAttemptHTTP2: i%4 == 1}
		c := &http.Client{Transport: tr, Timeout: testTimeout}
		wg.Go(func() {
			defer tr.CloseIdleConnections()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				path := fmt.Sprintf("/w%d/%d", i, n)
				resp, body, _, err := getOn(c, path)
				if err != nil || resp.StatusCode != 200 || body != "ok "+path {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: %v %v %q", path, err, resp, body))
					continue
				}
				ok.Add(1)
			}
		})
	}
	const rotations = 5
	for gen := 1; gen <= rotations; gen++ {
		before := ok.Load()
		eventually(t, "requests between rotations", func() bool { return ok.Load() >= before+50 || failed.Load() > 0 })
		next := serverLeaf(t, ca, fmt.Sprintf("gen-%d", gen))
		d.UpdatePair(next, ca)
		if changed, err := watch.Check(time.Now()); !changed || err != nil {
			t.Fatalf("rotation %d: changed %v, err %v", gen, changed, err)
		}
		if got := servedLeaf(t, p.addr, "localhost", pool); !got.Equal(next.Cert) {
			t.Fatalf("rotation %d: the next handshake got %s", gen, got.Subject.CommonName)
		}
	}
	before := ok.Load()
	eventually(t, "requests after the last rotation", func() bool { return ok.Load() >= before+50 || failed.Load() > 0 })
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed during the rotations; first: %v", failed.Load(), failed.Load()+ok.Load(), firstErr.Load())
	}
	t.Logf("%d requests, %d rotations, none lost", ok.Load(), rotations)

	resp, _, reused, err := getOn(old, "/after")
	must(t, err)
	if !reused || !resp.TLS.PeerCertificates[0].Equal(first.Cert) {
		t.Errorf("the connection opened before the rotations: reused %v, certificate %s", reused, resp.TLS.PeerCertificates[0].Subject.CommonName)
	}
	if m := metricsOf(t, p.srv); !strings.Contains(m, fmt.Sprintf(`sluice_tls_reloads_total{result="ok",source="listeners[0].tls"} %d`, rotations)) {
		t.Errorf("reload metric:\n%s", grepLines(m, "sluice_tls_reloads"))
	}
}

// A reload of an unchanged configuration whose certificate files have
// new contents serves the new certificate (the watch is off here).
func TestReloadServesNewCertificateContents(t *testing.T) {
	be := backend(t, echoHeaders)
	ca := testcert.NewCA(t, "CA")
	d := testcert.NewSecretDir(t)
	d.UpdatePair(serverLeaf(t, ca, "old"), nil)
	p := startProxy(t, tlsConfigText(be.URL, fmt.Sprintf("cert: %s, key: %s, watch: 0s", d.Path("tls.crt"), d.Path("tls.key"))))
	next := serverLeaf(t, ca, "new")
	d.UpdatePair(next, nil)
	if got := servedLeaf(t, p.addr, "localhost", ca.Pool()); got.Subject.CommonName != "old" {
		t.Fatalf("served %s before the reload", got.Subject.CommonName)
	}
	must(t, p.srv.Reload())
	if got := servedLeaf(t, p.addr, "localhost", ca.Pool()); !got.Equal(next.Cert) {
		t.Fatalf("after the reload: served %s", got.Subject.CommonName)
	}
	// A changed setting (another path) is refused with the reason.
	must(t, os.WriteFile(p.file, []byte(tlsConfigText(be.URL, fmt.Sprintf("cert: %s, key: %s, watch: 0s, min_version: '1.3'", d.Path("tls.crt"), d.Path("tls.key")))), 0o600))
	if err := p.srv.Reload(); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("a changed tls setting on reload: %v", err)
	}
}
