// SPDX-License-Identifier: Apache-2.0

// Package testcert makes certificates for tests: a private certificate
// authority, server and client certificates it signs (ECDSA P-256,
// crypto/x509), their PEM files, and a directory that changes them the
// way kubelet updates a mounted Secret (an atomic swap of its ..data
// symlink). Nothing here is for production: keys are generated per test
// and written with mode 0600 under the test's temporary directory.
package testcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/testkit"
)

var serial atomic.Int64

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	// PEM is the CA certificate, PEM-encoded (a bundle of one).
	PEM []byte
	key crypto.Signer
}

// NewCA returns a new CA named cn, valid from an hour ago for a day.
func NewCA(t testkit.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("testcert: CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testcert: CA: %v", err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool returns a pool that trusts the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteCA writes the CA certificate to a new file in a temporary
// directory of t and returns its name.
func (ca *CA) WriteCA(t testkit.TB) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "ca.pem")
	write(t, name, ca.PEM)
	return name
}

// Leaf describes a certificate to issue.
type Leaf struct {
	// CommonName is the subject's CN.
	CommonName string
	// DNSNames, IPs and URIs are the subject alternative names; IPs and
	// URIs are parsed (net.ParseIP, url.Parse).
	DNSNames []string
	IPs      []string
	URIs     []string
	// Client makes a client certificate (extended key usage clientAuth);
	// the default is a server certificate (serverAuth).
	Client bool
	// NotAfter is the end of validity (default: a day from now).
	NotAfter time.Time
}

// Pair is an issued certificate with its key.
type Pair struct {
	Cert *x509.Certificate
	// CertPEM is the certificate followed by the CA's (a chain);
	// KeyPEM the private key (PKCS #8).
	CertPEM, KeyPEM []byte
}

// Issue signs a certificate for l.
func (ca *CA) Issue(t testkit.TB, l Leaf) *Pair {
	t.Helper()
	key := newKey(t)
	notAfter := l.NotAfter
	if notAfter.IsZero() {
		notAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: l.CommonName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter, DNSNames: l.DNSNames,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if l.Client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, s := range l.IPs {
		ip := net.ParseIP(s)
		if ip == nil {
			t.Fatalf("testcert: %q is not an IP address", s)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	for _, s := range l.URIs {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("testcert: %v", err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		t.Fatalf("testcert: issue %q: %v", l.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testcert: issue %q: %v", l.CommonName, err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.PEM...)
	return &Pair{Cert: cert, CertPEM: chain, KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})}
}

// TLS returns the pair as a tls.Certificate (for a client or a server
// made in the test).
func (p *Pair) TLS(t testkit.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	return c
}

// Write writes the pair to name.crt and name.key in dir and returns the
// file names.
func (p *Pair) Write(t testkit.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	write(t, certFile, p.CertPEM)
	write(t, keyFile, p.KeyPEM)
	return certFile, keyFile
}

func newKey(t testkit.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testcert: key: %v", err)
	}
	return k
}

func write(t testkit.TB, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatalf("testcert: %v", err)
	}
}

// SecretDir is a directory laid out the way kubelet mounts a Secret or
// ConfigMap volume: each file is a symlink through ..data, itself a
// symlink to a timestamped directory holding the contents. Update writes
// a new timestamped directory and renames a new ..data over the old one
// (kubelet's atomic writer), so a reader sees either every old file or
// every new one, at unchanged paths.
type SecretDir struct {
	t   testkit.TB
	Dir string
	n   int
}

// NewSecretDir returns an empty secret directory in a temporary directory
// of t.
func NewSecretDir(t testkit.TB) *SecretDir { return &SecretDir{t: t, Dir: t.TempDir()} }

// Path returns the path of file name in the directory (its symlink).
func (d *SecretDir) Path(name string) string { return filepath.Join(d.Dir, name) }

// Update swaps in a new version holding files (name → content); a name
// not in files is gone from the new version.
func (d *SecretDir) Update(files map[string][]byte) {
	t := d.t
	t.Helper()
	d.n++
	ts := fmt.Sprintf("..2026_01_02_03_04_%02d.%d", d.n%60, d.n)
	if err := os.Mkdir(filepath.Join(d.Dir, ts), 0o700); err != nil {
		t.Fatalf("testcert: %v", err)
	}
	for name, b := range files {
		write(t, filepath.Join(d.Dir, ts, name), b)
	}
	tmp := filepath.Join(d.Dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatalf("testcert: %v", err)
	}
	data := filepath.Join(d.Dir, "..data")
	old, _ := os.Readlink(data)
	if err := os.Rename(tmp, data); err != nil {
		t.Fatalf("testcert: %v", err)
	}
	for name := range files {
		link := filepath.Join(d.Dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatalf("testcert: %v", err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(d.Dir, old)); err != nil {
			t.Fatalf("testcert: %v", err)
		}
	}
}

// UpdatePair swaps in a version holding p as tls.crt and tls.key (the
// keys of a kubernetes.io/tls Secret) and, when ca is not nil, its
// certificate as ca.crt, as cert-manager writes them.
func (d *SecretDir) UpdatePair(p *Pair, ca *CA) {
	d.t.Helper()
	files := map[string][]byte{"tls.crt": p.CertPEM, "tls.key": p.KeyPEM}
	if ca != nil {
		files["ca.crt"] = ca.PEM
	}
	d.Update(files)
}
