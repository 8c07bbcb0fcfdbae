// SPDX-License-Identifier: Apache-2.0

package tlsconf

import (
	"cmp"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/tlsfile"
)

// Defaults of Config and UpstreamConfig.
const (
	// DefaultWatch is how often the files of a TLS setting are read to
	// see whether they changed.
	DefaultWatch = 10 * time.Second
	// DefaultMinVersion is the oldest TLS version accepted.
	DefaultMinVersion = "1.2"
)

// The values of Config.ClientAuth.
const (
	// ClientAuthNone asks for no client certificate.
	ClientAuthNone = "none"
	// ClientAuthRequest asks for one and verifies it when the client
	// sends one; a client without one is served too, without an identity.
	ClientAuthRequest = "request"
	// ClientAuthRequire refuses the handshake of a client without a
	// certificate that ClientCA verifies.
	ClientAuthRequire = "require"
)

// Config is the TLS of a client listener or of the admin listener
// (the proxy's TLSConfig):
// the certificates it serves, chosen by SNI and re-read when their files
// change, and the verification of client certificates (mutual TLS).
//
// Certificates rotate without a restart: every Watch, and on every
// reload, the files are read again; when their contents changed (a
// digest of the bytes, so that a Kubernetes Secret's symlink swap and an
// in-place write are both seen) they are parsed and served to new
// handshakes, while open connections keep theirs. New contents that do
// not load keep the certificates in service: a warning names the file
// and sluice_tls_reloads_total{result="error"} counts it. Changing the
// settings themselves (a path, client_auth, min_version) needs a
// restart.
type Config struct {
	// Cert and Key name a PEM certificate chain (leaf first) and the
	// PEM private key of its leaf: the listener's first certificate
	// (default none; at least one of Cert and Certificates is required).
	Cert string `yaml:"cert,omitempty"`
	Key  string `yaml:"key,omitempty"`
	// Certificates are further certificates. A handshake gets the first
	// certificate (Cert first, then these in order) whose DNS names
	// (wildcards included) match the client's SNI and whose key type the
	// client supports; when none matches, or the client sent no SNI, the
	// first certificate.
	Certificates []CertKeyConfig `yaml:"certificates,omitempty"`
	// MinVersion is the oldest TLS version accepted: "1.2" (default) or
	// "1.3".
	MinVersion string `yaml:"min_version"`
	// Watch is how often the files are read to see whether they changed
	// (default 10s; 0s: only on reload).
	Watch *time.Duration `yaml:"watch"`
	// ClientCA names a PEM bundle of the CAs that client certificates
	// must chain to (default none).
	ClientCA string `yaml:"client_ca,omitempty"`
	// ClientAuth is "none" (no client certificate is asked for),
	// "request" (a certificate is asked for and verified against
	// ClientCA when the client sends one) or "require" (the handshake
	// fails without one) (default: require when ClientCA is set, else
	// none).
	ClientAuth string `yaml:"client_auth"`
}

// CertKeyConfig names a PEM certificate chain and its private key.
type CertKeyConfig struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// UpstreamConfig is how the proxy speaks TLS to https:// servers (the
// proxy's UpstreamTLSConfig):
// whom it trusts, the client certificate it shows, the name it asks for
// and verifies. Its files are re-read every Watch and on reload, as a
// listener's are; a new CA bundle or client certificate applies to new
// upstream connections.
type UpstreamConfig struct {
	// CA names a PEM bundle of the CAs that servers' certificates must
	// chain to (default: the system's roots).
	CA string `yaml:"ca,omitempty"`
	// Cert and Key name a client certificate chain and its private key,
	// shown to servers that ask for one (default none).
	Cert string `yaml:"cert,omitempty"`
	Key  string `yaml:"key,omitempty"`
	// ServerName is the name sent as SNI and verified in the servers'
	// certificates (default: each server URL's host).
	ServerName string `yaml:"server_name,omitempty"`
	// MinVersion is the oldest TLS version accepted: "1.2" (default) or
	// "1.3".
	MinVersion string `yaml:"min_version"`
	// Watch is how often the files are read to see whether they changed
	// (default 10s; 0s: only on reload).
	Watch *time.Duration `yaml:"watch"`
}

// SetDefaults fills the documented defaults of c's unset fields; a nil
// c stays nil.
func (c *Config) SetDefaults() {
	if c == nil {
		return
	}
	setSharedDefaults(&c.MinVersion, &c.Watch)
	if c.ClientAuth == "" {
		c.ClientAuth = ClientAuthNone
		if c.ClientCA != "" {
			c.ClientAuth = ClientAuthRequire
		}
	}
}

// SetDefaults fills the documented defaults of c's unset fields; a nil
// c stays nil.
func (c *UpstreamConfig) SetDefaults() {
	if c == nil {
		return
	}
	setSharedDefaults(&c.MinVersion, &c.Watch)
}

// setSharedDefaults fills the defaults of the two fields a listener's
// and the upstream TLS setting share: min_version and watch.
func setSharedDefaults(minVersion *string, watch **time.Duration) {
	*minVersion = cmp.Or(*minVersion, DefaultMinVersion)
	if *watch == nil {
		d := DefaultWatch
		*watch = &d
	}
}

// VerifiesClients reports whether c verifies client certificates (a
// nil c does not).
func (c *Config) VerifiesClients() bool {
	return c != nil && (c.ClientAuth == ClientAuthRequest || c.ClientAuth == ClientAuthRequire)
}

// RequiresClientCert reports whether c refuses clients without a
// verified certificate (a nil c does not).
func (c *Config) RequiresClientCert() bool { return c != nil && c.ClientAuth == ClientAuthRequire }

func watchOf(d *time.Duration) time.Duration {
	if d == nil {
		return DefaultWatch
	}
	return *d
}

// tlsFile is one file of a TLS setting: the YAML path of the field that
// names it, and its name.
type tlsFile struct{ field, name string }

// files lists c's files at path p: each certificate's chain and key,
// then the client CA bundle.
func (c *Config) files(p string) []tlsFile {
	var out []tlsFile
	if c.Cert != "" || c.Key != "" {
		out = append(out, tlsFile{p + ".cert", c.Cert}, tlsFile{p + ".key", c.Key})
	}
	for i, ck := range c.Certificates {
		q := fmt.Sprintf("%s.certificates[%d]", p, i)
		out = append(out, tlsFile{q + ".cert", ck.Cert}, tlsFile{q + ".key", ck.Key})
	}
	if c.ClientCA != "" {
		out = append(out, tlsFile{p + ".client_ca", c.ClientCA})
	}
	return out
}

func (c *UpstreamConfig) files(p string) []tlsFile {
	var out []tlsFile
	if c.CA != "" {
		out = append(out, tlsFile{p + ".ca", c.CA})
	}
	if c.Cert != "" || c.Key != "" {
		out = append(out, tlsFile{p + ".cert", c.Cert}, tlsFile{p + ".key", c.Key})
	}
	return out
}

// Validate checks c's settings (at path p, "listeners[0].tls") and
// that its files load, reporting the first invalid field as a
// *sluice.FieldError. Call SetDefaults first.
func (c *Config) Validate(p string) error {
	if c.Cert == "" && c.Key == "" && len(c.Certificates) == 0 {
		return fieldErr(p, "needs a certificate: cert and key, or certificates")
	}
	if err := checkPairNames(p, c.Cert, c.Key); err != nil {
		return err
	}
	for i, ck := range c.Certificates {
		if err := checkPairNames(fmt.Sprintf("%s.certificates[%d]", p, i), ck.Cert, ck.Key); err != nil {
			return err
		}
		if ck.Cert == "" && ck.Key == "" {
			return fieldErr(fmt.Sprintf("%s.certificates[%d]", p, i), "needs cert and key")
		}
	}
	if _, err := tlsfile.ParseVersion(c.MinVersion); err != nil {
		return fieldErr(p+".min_version", "%v", err)
	}
	if err := checkWatch(p, c.Watch); err != nil {
		return err
	}
	switch c.ClientAuth {
	case ClientAuthNone:
		if c.ClientCA != "" {
			return fieldErr(p+".client_auth", "%q with client_ca set: say request or require, or remove client_ca", c.ClientAuth)
		}
	case ClientAuthRequest, ClientAuthRequire:
		if c.ClientCA == "" {
			return fieldErr(p+".client_ca", "is required with client_auth %s: the PEM bundle of the CAs client certificates must chain to", c.ClientAuth)
		}
	default:
		return fieldErr(p+".client_auth", "%q is invalid: must be %s, %s or %s", c.ClientAuth, ClientAuthNone, ClientAuthRequest, ClientAuthRequire)
	}
	_, _, err := loadTLS(serverBuild(p, c))
	return err
}

// Validate checks c's settings (at path p, "backends.tls") against the
// URLs of the servers it would speak to, and that its files load,
// reporting the first invalid field as a *sluice.FieldError. Call
// SetDefaults first.
func (c *UpstreamConfig) Validate(p string, serverURLs []string) error {
	if err := checkPairNames(p, c.Cert, c.Key); err != nil {
		return err
	}
	if _, err := tlsfile.ParseVersion(c.MinVersion); err != nil {
		return fieldErr(p+".min_version", "%v", err)
	}
	if err := checkWatch(p, c.Watch); err != nil {
		return err
	}
	if c.ServerName != "" && strings.ContainsAny(c.ServerName, " /:") {
		return fieldErr(p+".server_name", "%q is invalid: a host name such as api.internal, without port", c.ServerName)
	}
	https := false
	for _, u := range serverURLs {
		https = https || strings.HasPrefix(strings.ToLower(u), "https://")
	}
	if !https {
		return fieldErr(p, "is set but no server is https://: the upstream connections would not use it")
	}
	_, _, err := loadTLS(upstreamBuild(p, c))
	return err
}

func checkPairNames(p, cert, key string) error {
	switch {
	case cert != "" && key == "":
		return fieldErr(p+".key", "is required with cert: the PEM private key of the certificate")
	case cert == "" && key != "":
		return fieldErr(p+".cert", "is required with key: the PEM certificate chain of the key")
	}
	return nil
}

func checkWatch(p string, d *time.Duration) error {
	if d != nil && *d < 0 {
		return fieldErr(p+".watch", "%v is invalid: must be a positive duration, or 0s for only on reload", *d)
	}
	return nil
}

// readTLSFiles reads files together (tlsfile.Read), the error naming
// the field of the file that could not be read.
func readTLSFiles(files []tlsFile) ([][]byte, [sha256.Size]byte, error) {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.name
	}
	data, sum, err := tlsfile.Read(names)
	var re *tlsfile.ReadError
	if errors.As(err, &re) {
		return nil, sum, fieldErr(files[re.Index].field, "%v", err)
	}
	return data, sum, err
}

// fileErr places a tlsfile error about file f.
func fileErr(f tlsFile, err error) error {
	var te *tlsfile.Error
	if errors.As(err, &te) {
		return fieldErr(f.field, "%q: %s", f.name, te.Msg)
	}
	return fieldErr(f.field, "%q: %v", f.name, err)
}

// parsePairs parses the certificate pairs of files (cert, key, cert,
// key, ...) from data.
func parsePairs(files []tlsFile, data [][]byte) ([]tls.Certificate, error) {
	var out []tls.Certificate
	for i := 0; i+1 < len(files); i += 2 {
		pair, err := tlsfile.ParsePair(data[i], data[i+1])
		if err != nil {
			var te *tlsfile.Error
			if errors.As(err, &te) && te.Input == tlsfile.InputKey {
				return nil, fileErr(files[i+1], err)
			}
			return nil, fileErr(files[i], err)
		}
		out = append(out, pair)
	}
	return out, nil
}

// clientAuthType maps Config.ClientAuth to crypto/tls's.
func clientAuthType(s string) tls.ClientAuthType {
	switch s {
	case ClientAuthRequest:
		return tls.VerifyClientCertIfGiven
	case ClientAuthRequire:
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
}

// tlsBuild makes a configuration from the contents of a setting's files.
type tlsBuild func(data [][]byte) (*tls.Config, error)

// loadTLS reads files together and builds the configuration from their
// contents, returning it with the digest of the files.
func loadTLS(files []tlsFile, build tlsBuild) (*tls.Config, [sha256.Size]byte, error) {
	data, sum, err := readTLSFiles(files)
	if err != nil {
		return nil, sum, err
	}
	conf, err := build(data)
	return conf, sum, err
}

// serverBuild returns the files of c (at path p) and the build of the
// configuration a handshake uses from their contents; the build keeps a
// copy of c.
func serverBuild(p string, c *Config) ([]tlsFile, tlsBuild) {
	cc := *c
	files := cc.files(p)
	return files, func(data [][]byte) (*tls.Config, error) { return buildServerTLS(&cc, files, data) }
}

func buildServerTLS(c *Config, files []tlsFile, data [][]byte) (*tls.Config, error) {
	n := len(files)
	var pool *x509.CertPool
	if c.ClientCA != "" {
		n--
		var err error
		if pool, _, err = tlsfile.ParseCAs(data[n]); err != nil {
			return nil, fileErr(files[n], err)
		}
	}
	certs, err := parsePairs(files[:n], data[:n])
	if err != nil {
		return nil, err
	}
	minV, err := tlsfile.ParseVersion(c.MinVersion)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: certs, MinVersion: minV, NextProtos: []string{"h2", "http/1.1"},
		ClientCAs: pool, ClientAuth: clientAuthType(c.ClientAuth)}, nil
}

// upstreamBuild returns the files of c (at path p) and the build of the
// configuration upstream handshakes start from (ServerName still to set
// when c has none) from their contents; the build keeps a copy of c.
func upstreamBuild(p string, c *UpstreamConfig) ([]tlsFile, tlsBuild) {
	cc := *c
	files := cc.files(p)
	return files, func(data [][]byte) (*tls.Config, error) { return buildUpstreamTLS(&cc, files, data) }
}

func buildUpstreamTLS(c *UpstreamConfig, files []tlsFile, data [][]byte) (*tls.Config, error) {
	minV, err := tlsfile.ParseVersion(c.MinVersion)
	if err != nil {
		return nil, err
	}
	conf := &tls.Config{MinVersion: minV, ServerName: c.ServerName, NextProtos: []string{"h2", "http/1.1"}}
	i := 0
	if c.CA != "" {
		if conf.RootCAs, _, err = tlsfile.ParseCAs(data[0]); err != nil {
			return nil, fileErr(files[0], err)
		}
		i = 1
	}
	if conf.Certificates, err = parsePairs(files[i:], data[i:]); err != nil {
		return nil, err
	}
	return conf, nil
}

func fieldErr(path, format string, args ...any) error {
	return fielderr.Errorf(path, format, args...)
}
