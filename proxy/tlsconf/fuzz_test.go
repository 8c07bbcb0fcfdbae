// SPDX-License-Identifier: Apache-2.0

package tlsconf

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testcert"
)

// FuzzServerTLSFiles: any contents of a listener's certificate, key and
// client CA files build a handshake configuration or a FieldError that
// names one of the three fields, never a panic, and never quote the key
// file.
func FuzzServerTLSFiles(f *testing.F) {
	ca := testcert.NewCA(f, "CA")
	p := ca.Issue(f, testcert.Leaf{CommonName: "x", DNSNames: []string{"x.test"}})
	q := ca.Issue(f, testcert.Leaf{CommonName: "y"})
	f.Add(p.CertPEM, p.KeyPEM, ca.PEM)
	f.Add(p.CertPEM, q.KeyPEM, ca.PEM)
	f.Add(p.CertPEM, p.KeyPEM, p.KeyPEM)
	f.Add([]byte("junk"), []byte{}, []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"))
	cfg := &Config{Cert: "c.pem", Key: "k.pem", ClientCA: "ca.pem"}
	cfg.SetDefaults()
	const path = "listeners[0].tls"
	files := cfg.files(path)
	f.Fuzz(func(t *testing.T, cert, key, clientCA []byte) {
		conf, err := buildServerTLS(cfg, files, [][]byte{cert, key, clientCA})
		if err == nil {
			if len(conf.Certificates) != 1 || conf.ClientCAs == nil || conf.Certificates[0].Leaf == nil {
				t.Fatalf("a configuration without its certificate or CA: %+v", conf)
			}
			return
		}
		var fe *sluice.FieldError
		if !errors.As(err, &fe) || (fe.Path != path+".cert" && fe.Path != path+".key" && fe.Path != path+".client_ca") {
			t.Fatalf("error %T %v names no file field", err, err)
		}
		for _, line := range strings.Split(string(key), "\n") {
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") && strings.Contains(err.Error(), line) {
				t.Fatalf("error %q quotes the key file", err)
			}
		}
	})
}
