// SPDX-License-Identifier: Apache-2.0

package testcert

import (
	"bytes"
	"crypto/x509"
	"os"
	"testing"
)

// Issued certificates verify against their CA for their usage, and a
// SecretDir swap changes every file at once behind unchanged paths.
func TestIssueAndSwap(t *testing.T) {
	ca := NewCA(t, "CA")
	srv := ca.Issue(t, Leaf{CommonName: "s", DNSNames: []string{"a.test"}, IPs: []string{"127.0.0.1"}})
	cli := ca.Issue(t, Leaf{CommonName: "c", URIs: []string{"spiffe://t/c"}, Client: true})
	if _, err := srv.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "a.test"}); err != nil {
		t.Fatalf("server certificate: %v", err)
	}
	if _, err := cli.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("client certificate: %v", err)
	}
	if _, err := cli.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool()}); err == nil {
		t.Fatal("a client certificate verified for a server")
	}
	_ = srv.TLS(t)

	d := NewSecretDir(t)
	d.UpdatePair(srv, ca)
	link, err := os.Readlink(d.Path("tls.crt"))
	if err != nil || link != "..data/tls.crt" {
		t.Fatalf("tls.crt links to %q (%v)", link, err)
	}
	d.UpdatePair(cli, nil)
	got, err := os.ReadFile(d.Path("tls.crt"))
	if err != nil || !bytes.Equal(got, cli.CertPEM) {
		t.Fatalf("after the swap: %v", err)
	}
	if _, err := os.ReadFile(d.Path("ca.crt")); err == nil {
		t.Error("a file left out of the new version is still there")
	}
	entries, _ := os.ReadDir(d.Dir)
	dirs := 0
	for _, e := range entries {
		if e.IsDir() {
			dirs++
		}
	}
	if dirs != 1 {
		t.Errorf("%d version directories after two updates, want 1", dirs)
	}
}
