// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/localredis"
	"github.com/sluicehq/sluice/internal/secret"
	"github.com/sluicehq/sluice/internal/testcert"
)

// redisTLS is a CA and the PEM files of a TLS redis-server on 127.0.0.1.
type redisTLS struct {
	ca                    *testcert.CA
	caFile, cert, key     string
	clientCert, clientKey string // a client certificate of the same CA
}

func newRedisTLS(t *testing.T) *redisTLS {
	ca := testcert.NewCA(t, "redis CA")
	dir := t.TempDir()
	r := &redisTLS{ca: ca, caFile: ca.WriteCA(t)}
	r.cert, r.key = ca.Issue(t, testcert.Leaf{CommonName: "redis", DNSNames: []string{"localhost", "redis.internal"}, IPs: []string{"127.0.0.1"}}).Write(t, dir, "redis")
	r.clientCert, r.clientKey = ca.Issue(t, testcert.Leaf{CommonName: "sluice", Client: true}).Write(t, dir, "client")
	return r
}

// writeSecret writes a secret file as a mounted Secret holds it: the
// value, a trailing newline.
func writeSecret(t *testing.T, value string) string {
	name := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(name, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// exchange runs one exchange with cfg's store and returns its error.
func exchange(t *testing.T, cfg Config) error {
	t.Helper()
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	s, err := NewStore(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	x, err := s.Exchange(ctx, Report{Instance: cfg.Instance, Mode: ModeSynced})
	if err == nil && (len(x.Peers) != 1 || x.Peers[0].Report.Instance != cfg.Instance) {
		t.Fatalf("exchange: peers %+v", x.Peers)
	}
	return err
}

// A TLS-only redis-server whose default user is off and whose ACL user
// has its password in a file: the store reaches it with the private CA
// and the user and password read from files; a wrong password, no TLS,
// or the system's roots do not.
func TestStoreTLSWithACLFromFiles(t *testing.T) {
	rt := newRedisTLS(t)
	const password = "s3cret-Pa55word-for-alice"
	srv := localredis.ForTestWith(t, localredis.Options{
		TLS:   &localredis.TLSFiles{Cert: rt.cert, Key: rt.key, CA: rt.caFile},
		Users: []string{"default off", "alice on >" + password + " ~* &* +@all"}})
	base := Config{Addrs: []string{srv.Addr}, Instance: "a", Period: 4 * time.Second,
		UsernameFile: writeSecret(t, "alice"), PasswordFile: writeSecret(t, "  "+password+"  "),
		TLS: &TLSConfig{CA: rt.caFile}}
	if err := exchange(t, base); err != nil {
		t.Fatalf("TLS with the ACL user from files: %v", err)
	}
	inline := base
	inline.UsernameFile, inline.PasswordFile, inline.Username, inline.Password = "", "", "alice", secret.String(password)
	if err := exchange(t, inline); err != nil {
		t.Fatalf("TLS with the ACL user inline: %v", err)
	}

	wrong := base
	wrong.PasswordFile = writeSecret(t, "not-the-password")
	if err := exchange(t, wrong); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("a wrong password: %v", err)
	}
	plain := base
	plain.TLS = nil
	if err := exchange(t, plain); err == nil {
		t.Error("plaintext reached a TLS-only Redis")
	}
	sysRoots := base
	sysRoots.TLS = &TLSConfig{}
	if err := exchange(t, sysRoots); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("the system's roots verified a private CA: %v", err)
	}
	otherName := base
	otherName.TLS = &TLSConfig{CA: rt.caFile, ServerName: "other.internal"}
	if err := exchange(t, otherName); err == nil {
		t.Error("a server name the certificate does not hold was accepted")
	}
	named := base
	named.TLS = &TLSConfig{CA: rt.caFile, ServerName: "redis.internal"}
	if err := exchange(t, named); err != nil {
		t.Errorf("server_name redis.internal: %v", err)
	}
	for _, field := range []string{"password_file", "username_file"} {
		c := base
		empty := writeSecret(t, "")
		if field == "password_file" {
			c.PasswordFile = empty
		} else {
			c.UsernameFile = empty
		}
		if err := exchange(t, c); fielderr.Path(err) != field || !strings.Contains(err.Error(), "is empty") {
			t.Errorf("an empty %s: %v", field, err)
		}
	}
}

// A Redis that requires client certificates (tls-auth-clients yes): the
// store shows tls.cert; without it the handshake fails.
func TestStoreTLSClientCertificate(t *testing.T) {
	rt := newRedisTLS(t)
	srv := localredis.ForTestWith(t, localredis.Options{
		TLS: &localredis.TLSFiles{Cert: rt.cert, Key: rt.key, CA: rt.caFile, ClientCert: rt.clientCert, ClientKey: rt.clientKey}})
	cfg := Config{Addrs: []string{srv.Addr}, Instance: "a", Period: 4 * time.Second,
		TLS: &TLSConfig{CA: rt.caFile, Cert: rt.clientCert, Key: rt.clientKey, MinVersion: "1.3"}}
	if err := exchange(t, cfg); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	cfg.TLS = &TLSConfig{CA: rt.caFile}
	if err := exchange(t, cfg); err == nil {
		t.Error("reached a Redis that requires client certificates without one")
	}
}

// Several addresses make a Redis Cluster client: over TLS it follows
// the cluster's slot map (CLUSTER SLOTS, TLS ports) to the node.
func TestStoreTLSRedisCluster(t *testing.T) {
	rt := newRedisTLS(t)
	srv := localredis.ForTestWith(t, localredis.Options{Cluster: true,
		TLS: &localredis.TLSFiles{Cert: rt.cert, Key: rt.key, CA: rt.caFile}})
	_, port, _ := strings.Cut(srv.Addr, ":")
	cfg := Config{Addrs: []string{srv.Addr, "localhost:" + port}, Instance: "a", Period: 4 * time.Second, TLS: &TLSConfig{CA: rt.caFile}}
	if err := exchange(t, cfg); err != nil {
		t.Fatalf("Redis Cluster over TLS: %v", err)
	}
	cfg.TLS = nil
	if err := exchange(t, cfg); err == nil {
		t.Error("plaintext reached a TLS-only Redis Cluster")
	}
}

func TestTLSAndCredentialsValidation(t *testing.T) {
	ok := func() Config { return Config{Addrs: []string{"127.0.0.1:6379"}} }
	for _, c := range []struct {
		mod  func(*Config)
		path string
	}{
		{func(c *Config) { c.Username = "alice" }, "password"},
		{func(c *Config) { c.UsernameFile = "/run/secrets/user" }, "password"},
		{func(c *Config) { c.TLS = &TLSConfig{Cert: "c.pem"} }, "tls.key"},
		{func(c *Config) { c.TLS = &TLSConfig{Key: "k.pem"} }, "tls.cert"},
		{func(c *Config) { c.TLS = &TLSConfig{MinVersion: "1.1"} }, "tls.min_version"},
		{func(c *Config) { c.TLS = &TLSConfig{ServerName: "redis:6379"} }, "tls.server_name"},
	} {
		cfg := ok()
		c.mod(&cfg)
		cfg.SetDefaults()
		if err := cfg.Validate(); fielderr.Path(err) != c.path {
			t.Errorf("%+v: %v, want %s", cfg, err, c.path)
		}
	}
	cfg := ok()
	cfg.TLS = &TLSConfig{CA: filepath.Join(t.TempDir(), "missing.pem")}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.TLS.MinVersion != DefaultTLSMinVersion {
		t.Errorf("min_version default %q", cfg.TLS.MinVersion)
	}
	if _, err := NewStore(cfg); fielderr.Path(err) != "tls.ca" || !strings.Contains(err.Error(), "cannot be read") {
		t.Errorf("a missing CA file: %v", err)
	}
	// The password never shows in the configuration's printed forms.
	cfg.Password = "hunter2-hunter2"
	for _, s := range []string{cfg.Password.String(), strings.TrimSpace(fmtV(cfg))} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("the password printed: %s", s)
		}
	}
}

func fmtV(v any) string { return fmt.Sprintf("%+v %#v", v, v) }
