// SPDX-License-Identifier: Apache-2.0

package tlsfile

import (
	"bytes"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testcert"
)

// keyLines returns the base64 lines of a PEM key: what must never show
// in an error.
func keyLines(key []byte) []string {
	var out []string
	for _, l := range strings.Split(string(key), "\n") {
		if len(l) >= 16 && !strings.HasPrefix(l, "-----") {
			out = append(out, l)
		}
	}
	return out
}

func noKeyBytes(t *testing.T, err error, key []byte) {
	t.Helper()
	for _, l := range keyLines(key) {
		if strings.Contains(err.Error(), l) || strings.Contains(err.Error(), l[:16]) {
			t.Fatalf("error %q quotes the key", err)
		}
	}
}

func TestParsePair(t *testing.T) {
	ca := testcert.NewCA(t, "test CA")
	p := ca.Issue(t, testcert.Leaf{CommonName: "a", DNSNames: []string{"a.test"}})
	other := ca.Issue(t, testcert.Leaf{CommonName: "b"})

	pair, err := ParsePair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if pair.Leaf == nil || pair.Leaf.Subject.CommonName != "a" || len(pair.Certificate) != 2 {
		t.Fatalf("leaf %v, chain of %d", pair.Leaf, len(pair.Certificate))
	}
	// One file holding the chain and the key, given as both (nginx's way).
	both := append(append([]byte{}, p.CertPEM...), p.KeyPEM...)
	if _, err := ParsePair(both, both); err != nil {
		t.Fatalf("combined file: %v", err)
	}

	cases := []struct {
		name      string
		cert, key []byte
		input     string
		msg       string
	}{
		{"key of another certificate", p.CertPEM, other.KeyPEM, InputKey, "does not match"},
		{"no key", p.CertPEM, nil, InputKey, "no PEM private key"},
		{"two keys", p.CertPEM, append(append([]byte{}, p.KeyPEM...), other.KeyPEM...), InputKey, "more than one"},
		{"key given as certificate", p.KeyPEM, p.KeyPEM, InputCert, "no PEM CERTIFICATE"},
		{"garbage certificate", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), p.KeyPEM, InputCert, "PEM block 1 is not a valid certificate"},
		{"empty certificate", nil, p.KeyPEM, InputCert, "no PEM CERTIFICATE"},
		{"public key as key", p.CertPEM, []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"), InputKey, `PEM block 1 is "PUBLIC KEY"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePair(c.cert, c.key)
			var te *Error
			if !errors.As(err, &te) || te.Input != c.input || !strings.Contains(te.Msg, c.msg) {
				t.Fatalf("got %v, want a %s error saying %q", err, c.input, c.msg)
			}
			noKeyBytes(t, err, p.KeyPEM)
			noKeyBytes(t, err, other.KeyPEM)
		})
	}
}

func TestParseCAs(t *testing.T) {
	a, b := testcert.NewCA(t, "A"), testcert.NewCA(t, "B")
	bundle := []byte("# Issuer: A\n" + string(a.PEM) + "\n# Issuer: B\n" + string(b.PEM))
	pool, certs, err := ParseCAs(bundle)
	if err != nil || len(certs) != 2 || pool == nil {
		t.Fatalf("bundle of two with comments: %d certs, %v", len(certs), err)
	}
	leaf := a.Issue(t, testcert.Leaf{CommonName: "x"})
	_, _, err = ParseCAs(append(append([]byte{}, a.PEM...), leaf.KeyPEM...))
	var te *Error
	if !errors.As(err, &te) || te.Input != InputCA || !strings.Contains(te.Msg, "PEM block 2 is a private key") {
		t.Fatalf("a key in a CA bundle: %v", err)
	}
	noKeyBytes(t, err, leaf.KeyPEM)
	if _, _, err := ParseCAs([]byte("not pem")); err == nil || !strings.Contains(err.Error(), "no PEM CERTIFICATE") {
		t.Fatalf("no PEM: %v", err)
	}
}

func TestReadDigestsContentNotPath(t *testing.T) {
	dir := testcert.NewSecretDir(t)
	ca := testcert.NewCA(t, "CA")
	p1 := ca.Issue(t, testcert.Leaf{CommonName: "one"})
	dir.UpdatePair(p1, nil)
	names := []string{dir.Path("tls.crt"), dir.Path("tls.key")}
	data, s1, err := Read(names)
	if err != nil || !bytes.Equal(data[0], p1.CertPEM) || !bytes.Equal(data[1], p1.KeyPEM) {
		t.Fatalf("read: %v", err)
	}
	if _, again, _ := Read(names); again != s1 {
		t.Fatal("the same contents read twice give two digests")
	}
	// The kubelet swap: same paths, same modification of nothing but
	// the ..data symlink.
	dir.UpdatePair(ca.Issue(t, testcert.Leaf{CommonName: "two"}), nil)
	if _, s2, err := Read(names); err != nil || s2 == s1 {
		t.Fatalf("after the swap: digest changed %v, %v", s2 != s1, err)
	}
	// The same bytes under swapped names are other contents.
	if _, sw, _ := Read([]string{names[1], names[0]}); sw == s1 {
		t.Fatal("swapped files give the same digest")
	}

	missing := filepath.Join(t.TempDir(), "gone.pem")
	_, _, err = Read([]string{names[0], missing})
	var re *ReadError
	if !errors.As(err, &re) || re.Index != 1 || re.Name != missing || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, _, err := Read([]string{t.TempDir()}); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("directory: %v", err)
	}
	big := filepath.Join(t.TempDir(), "big.pem")
	if err := os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read([]string{big}); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized file: %v", err)
	}
}

func TestParseVersion(t *testing.T) {
	for s, want := range map[string]uint16{"1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13} {
		if v, err := ParseVersion(s); err != nil || v != want {
			t.Errorf("%s: %x, %v", s, v, err)
		}
	}
	for _, s := range []string{"1.0", "1.1", "", "TLS1.2", "1.4"} {
		if _, err := ParseVersion(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	if _, err := ParseVersion("1.1"); !strings.Contains(err.Error(), "RFC 8996") {
		t.Errorf("1.1: %v", err)
	}
}

// FuzzParseCerts: any bytes as a certificate chain or CA bundle give
// certificates or an Error, never a panic, and an error never quotes
// the input.
func FuzzParseCerts(f *testing.F) {
	ca := testcert.NewCA(f, "CA")
	leaf := ca.Issue(f, testcert.Leaf{CommonName: "x"})
	f.Add(ca.PEM)
	f.Add(leaf.CertPEM)
	f.Add(append(append([]byte{}, ca.PEM...), leaf.KeyPEM...))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN \x00\xff-----\nAAAA\n-----END \x00\xff-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		certs, err := ParseCerts(InputCA, data)
		if err == nil {
			if len(certs) == 0 {
				t.Fatal("no certificate and no error")
			}
			return
		}
		var te *Error
		if !errors.As(err, &te) {
			t.Fatalf("error %T %v is not an *Error", err, err)
		}
		noKeyBytes(t, err, data)
		if _, _, err2 := ParseCAs(data); err2 == nil {
			t.Fatal("ParseCAs accepts what ParseCerts refuses")
		}
	})
}

// FuzzParsePair: any certificate and key bytes give a pair whose leaf
// matches the key, or an Error that never quotes the key.
func FuzzParsePair(f *testing.F) {
	ca := testcert.NewCA(f, "CA")
	p := ca.Issue(f, testcert.Leaf{CommonName: "x"})
	q := ca.Issue(f, testcert.Leaf{CommonName: "y"})
	f.Add(p.CertPEM, p.KeyPEM)
	f.Add(p.CertPEM, q.KeyPEM)
	f.Add(p.KeyPEM, p.CertPEM)
	f.Add([]byte{}, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, cert, key []byte) {
		pair, err := ParsePair(cert, key)
		if err != nil {
			var te *Error
			if !errors.As(err, &te) || (te.Input != InputCert && te.Input != InputKey) {
				t.Fatalf("error %T %v is not a certificate or key *Error", err, err)
			}
			noKeyBytes(t, err, key)
			return
		}
		if pair.Leaf == nil || pair.PrivateKey == nil || len(pair.Certificate) == 0 {
			t.Fatalf("a pair without leaf or key: %+v", pair)
		}
	})
}
