// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/classify"
	"github.com/sluicehq/sluice/internal/testcert"
)

// httpsGet fetches url with a client that trusts pool and shows its
// first cert, when given, to any server that asks for one (even one
// whose CAs did not sign it), and returns the status, the headers and
// the body, or the error.
func httpsGet(url string, pool *x509.CertPool, hdr map[string]string, certs ...tls.Certificate) (int, http.Header, string, error) {
	conf := &tls.Config{RootCAs: pool}
	if len(certs) > 0 {
		conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
	}
	tr := &http.Transport{TLSClientConfig: conf}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, "", err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: testTimeout}).Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// Client certificates on a listener: with require, a client without a
// verified certificate gets no answer; with request, it is served
// without an identity. The verified identity reaches the class rules
// (the class travels to the backend as the priority header).
func TestListenerClientAuth(t *testing.T) {
	be := backend(t, echoHeaders)
	ca := testcert.NewCA(t, "server CA")
	clients := testcert.NewCA(t, "client CA")
	stranger := testcert.NewCA(t, "another CA")
	dir := t.TempDir()
	cert, key := serverLeaf(t, ca, "proxy").Write(t, dir, "srv")
	clientCA := clients.WriteCA(t)
	api := clients.Issue(t, testcert.Leaf{CommonName: "api", URIs: []string{"spiffe://corp/ns/shop/sa/api"}, Client: true}).TLS(t)
	batch := clients.Issue(t, testcert.Leaf{CommonName: "batch", DNSNames: []string{"batch.corp"}, Client: true}).TLS(t)
	forged := stranger.Issue(t, testcert.Leaf{URIs: []string{"spiffe://corp/ns/shop/sa/api"}, Client: true}).TLS(t)
	const policyText = `classes:
  order: [mesh, known, default]
  rules:
    - {class: mesh, client_cert: {value: "spiffe://corp/ns/shop/sa/api"}}
    - {class: known, client_cert: {}}
`
	for _, mode := range []string{ClientAuthRequire, ClientAuthRequest} {
		t.Run(mode, func(t *testing.T) {
			p := startProxy(t, tlsConfigText(be.URL, fmt.Sprintf("cert: %s, key: %s, client_ca: %s, client_auth: %s", cert, key, clientCA, mode))+policyText)
			url := "https://" + p.addr + "/x"
			for _, c := range []struct {
				name     string
				certs    []tls.Certificate
				priority string // "" : served as default; "-": refused
			}{
				{"mesh identity", []tls.Certificate{api}, "mesh"},
				{"another verified identity", []tls.Certificate{batch}, "known"},
				{"certificate of another CA", []tls.Certificate{forged}, "-"},
				{"no certificate", nil, map[string]string{ClientAuthRequire: "-", ClientAuthRequest: ""}[mode]},
			} {
				// A client trying to claim a class by header gets nothing from it.
				code, h, _, err := httpsGet(url, ca.Pool(), map[string]string{"X-Sluice-Priority": "mesh"}, c.certs...)
				switch {
				case c.priority == "-":
					if err == nil {
						t.Errorf("%s: answered %d, want a refused handshake", c.name, code)
					}
				case err != nil || code != 200:
					t.Errorf("%s: %d %v", c.name, code, err)
				case h.Get("X-Got-X-Sluice-Priority") != c.priority:
					t.Errorf("%s: class %q reached the backend, want %q", c.name, h.Get("X-Got-X-Sluice-Priority"), c.priority)
				}
			}
		})
	}
}

// The proxy's TLS to an https backend: a private CA, a client
// certificate the backend requires, the name the backend's certificate
// holds (not the URL's address); HTTP/2 and HTTP/1.1 backends alike. A
// rotated client certificate is shown on the next connection.
func TestUpstreamTLS(t *testing.T) {
	backendCA := testcert.NewCA(t, "backend CA")
	proxyCA := testcert.NewCA(t, "proxy client CA")
	srvPair := backendCA.Issue(t, testcert.Leaf{CommonName: "backend", DNSNames: []string{"backend.internal"}})
	d := testcert.NewSecretDir(t)
	d.UpdatePair(proxyCA.Issue(t, testcert.Leaf{CommonName: "sluice-1", Client: true}), backendCA)
	for _, h2 := range []bool{true, false} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Proto", r.Proto)
				w.Header().Set("X-SNI", r.TLS.ServerName)
				w.Header().Set("X-Client", classify.CertIdentity(r.TLS.PeerCertificates[0]))
			}))
			be.TLS = &tls.Config{Certificates: []tls.Certificate{srvPair.TLS(t)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: proxyCA.Pool()}
			be.EnableHTTP2 = h2
			be.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
			be.StartTLS()
			t.Cleanup(be.Close)
			text := func(extra string) string {
				return baseConfig(be.URL, "") + fmt.Sprintf("  tls: {ca: %s, cert: %s, key: %s, watch: 0s%s}\n",
					d.Path("ca.crt"), d.Path("tls.crt"), d.Path("tls.key"), extra)
			}
			p := startProxy(t, text(", server_name: backend.internal"))
			code, h, body := get(t, p.url+"/a", nil)
			if code != 200 || h.Get("X-SNI") != "backend.internal" || h.Get("X-Client") != "sluice-1" {
				t.Fatalf("%d %q: SNI %q, client %q", code, body, h.Get("X-SNI"), h.Get("X-Client"))
			}
			if want := map[bool]string{true: "HTTP/2.0", false: "HTTP/1.1"}[h2]; h.Get("X-Proto") != want {
				t.Errorf("upstream protocol %s, want %s", h.Get("X-Proto"), want)
			}

			// Rotate the client certificate: new connections show it.
			d.UpdatePair(proxyCA.Issue(t, testcert.Leaf{CommonName: "sluice-2", Client: true}), backendCA)
			pool := p.srv.h.gen.Load().pool
			if changed, err := pool.tls.Watch().Check(time.Now()); !changed || err != nil {
				t.Fatalf("client certificate rotation: %v %v", changed, err)
			}
			pool.transport.CloseIdleConnections()
			if _, h, _ := get(t, p.url+"/b", nil); h.Get("X-Client") != "sluice-2" {
				t.Errorf("after the rotation the backend saw %q", h.Get("X-Client"))
			}
			d.UpdatePair(proxyCA.Issue(t, testcert.Leaf{CommonName: "sluice-1", Client: true}), backendCA)
			_, _ = pool.tls.Watch().Check(time.Now())

			// The URL's address is not a name of the backend's certificate.
			q := startProxy(t, text(""))
			if code, _, body := get(t, q.url+"/c", nil); code != http.StatusBadGateway || !strings.Contains(body, "TLS") {
				t.Errorf("without server_name: %d %q, want 502 naming TLS", code, body)
			}
			if m := metricsOf(t, q.srv); !strings.Contains(m, `cause="tls"`) {
				t.Errorf("the failure is not counted as tls:\n%s", grepLines(m, "upstream_errors"))
			}
		})
	}
}

func TestUpstreamTLSConfigErrors(t *testing.T) {
	ca := testcert.NewCA(t, "CA")
	caFile := ca.WriteCA(t)
	for _, c := range []struct {
		url, tls, path, msg string
	}{
		{"http://127.0.0.1:1", "{ca: " + caFile + "}", "backends.tls", "no server is https"},
		{"https://127.0.0.1:1", "{cert: " + caFile + "}", "backends.tls.key", "is required with cert"},
		{"https://127.0.0.1:1", "{ca: " + caFile + ".missing}", "backends.tls.ca", "cannot be read"},
		{"https://127.0.0.1:1", "{server_name: 'a:1'}", "backends.tls.server_name", "without port"},
		{"https://127.0.0.1:1", "{min_version: '1.0'}", "backends.tls.min_version", "RFC 8996"},
	} {
		_, err := parseText(t, baseConfig(c.url, "")+"  tls: "+c.tls+"\n")
		if errPath(err) != c.path || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("backends.tls %s: %v, want %s …%s…", c.tls, err, c.path, c.msg)
		}
	}
}

// The admin listener over TLS with client certificates: without one,
// no answer; with one, the admin API answers; a token, when also set,
// is still needed on every endpoint but the probes. Validation: client_auth require is
// authentication enough for a public admin address without a token;
// request is not.
func TestAdminTLS(t *testing.T) {
	be := backend(t, echoHeaders)
	ca := testcert.NewCA(t, "CA")
	ops := testcert.NewCA(t, "operators")
	dir := t.TempDir()
	cert, key := serverLeaf(t, ca, "admin").Write(t, dir, "admin")
	opsCA := ops.WriteCA(t)
	alice := ops.Issue(t, testcert.Leaf{CommonName: "alice", Client: true}).TLS(t)
	const token = "0123456789abcdef0123"
	p := startProxy(t, withBackend(fmt.Sprintf(`listeners: [{addr: 127.0.0.1:0}]
admin:
  addr: 127.0.0.1:0
  token: %s
  tls: {cert: %s, key: %s, client_ca: %s, client_auth: require}
backends: {servers: [{url: BACKEND}]}
`, token, cert, key, opsCA), be.URL))
	admin := "https://" + p.srv.AdminAddr().String()
	if _, _, _, err := httpsGet(admin+"/state", ca.Pool(), nil); err == nil {
		t.Error("the admin API answered a client without a certificate")
	}
	for _, path := range []string{"/state", "/ui"} {
		if code, _, _, err := httpsGet(admin+path, ca.Pool(), nil, alice); err != nil || code != http.StatusUnauthorized {
			t.Errorf("%s with a certificate but no token: %d %v, want 401", path, code, err)
		}
	}
	if code, _, _, err := httpsGet(admin+"/state", ca.Pool(), map[string]string{"Authorization": "Bearer " + token}, alice); err != nil || code != 200 {
		t.Errorf("/state with a certificate and the token: %d %v", code, err)
	}
	if code, _, _, err := httpsGet(admin+"/ui", ca.Pool(), map[string]string{"Authorization": "Bearer " + token}, alice); err != nil || code != 200 {
		t.Errorf("/ui with a certificate and the token: %d %v", code, err)
	}
	if resp, err := http.Get("http://" + p.srv.AdminAddr().String() + "/state"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("the TLS admin listener answered plaintext HTTP with %d", resp.StatusCode)
		}
	}

	public := func(extra string) string {
		return withBackend(fmt.Sprintf(`listeners: [{addr: 127.0.0.1:0}]
admin:
  addr: 0.0.0.0:9901
  allow_public: true
%s
backends: {servers: [{url: BACKEND}]}
`, extra), be.URL)
	}
	tlsBlock := func(mode string) string {
		return fmt.Sprintf("  tls: {cert: %s, key: %s, client_ca: %s, client_auth: %s}", cert, key, opsCA, mode)
	}
	if _, err := parseText(t, public(tlsBlock("require"))); err != nil {
		t.Errorf("public admin with client certificates required: %v", err)
	}
	for name, extra := range map[string]string{"request": tlsBlock("request"), "server TLS only": fmt.Sprintf("  tls: {cert: %s, key: %s}", cert, key), "none": ""} {
		if _, err := parseText(t, public(extra)); errPath(err) != "admin.token" {
			t.Errorf("public admin, %s, no token: %v, want admin.token refused", name, err)
		}
	}
}
