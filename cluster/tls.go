// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/secret"
	"github.com/sluicehq/sluice/internal/tlsfile"
)

// DefaultTLSMinVersion is the oldest TLS version TLSConfig accepts by
// default.
const DefaultTLSMinVersion = "1.2"

// TLSConfig is the TLS towards Redis: whom to trust, the client
// certificate to show, the name to verify. The same settings apply to
// every node of a Redis Cluster and to Sentinels and their master
// (go-redis's TLSConfig), so Sentinels must speak TLS too. Its files are
// read when the store is made: at start and on every reload. There is no
// switch to skip verification: give the private CA's bundle in CA.
type TLSConfig struct {
	// CA names a PEM bundle of the CAs the servers' certificates must
	// chain to (default: the system's roots).
	CA string `yaml:"ca,omitempty" json:"ca,omitempty"`
	// Cert and Key name a PEM client certificate chain and its private
	// key, for a Redis with tls-auth-clients (default none).
	Cert string `yaml:"cert,omitempty" json:"cert,omitempty"`
	Key  string `yaml:"key,omitempty" json:"key,omitempty"`
	// ServerName is the name verified in every server's certificate and
	// sent as SNI (default: each address's host).
	ServerName string `yaml:"server_name,omitempty" json:"server_name,omitempty"`
	// MinVersion is the oldest TLS version accepted: "1.2" (default) or
	// "1.3".
	MinVersion string `yaml:"min_version" json:"min_version"`
}

func (c *TLSConfig) validate() error {
	switch {
	case c.Cert != "" && c.Key == "":
		return badField("key", "unset", "required with cert: the PEM private key of the client certificate")
	case c.Cert == "" && c.Key != "":
		return badField("cert", "unset", "required with key: the PEM client certificate chain")
	}
	if _, err := tlsfile.ParseVersion(c.MinVersion); err != nil {
		return badField("min_version", fmt.Sprintf("%q", c.MinVersion), "must be 1.2 or 1.3")
	}
	if strings.ContainsAny(c.ServerName, " /:") {
		return badField("server_name", fmt.Sprintf("%q", c.ServerName), "a host name such as redis.internal, without port")
	}
	return nil
}

// config reads c's files and returns the client configuration.
func (c *TLSConfig) config() (*tls.Config, error) {
	minV, err := tlsfile.ParseVersion(c.MinVersion)
	if err != nil {
		return nil, badField("tls.min_version", fmt.Sprintf("%q", c.MinVersion), "must be 1.2 or 1.3")
	}
	conf := &tls.Config{MinVersion: minV, ServerName: c.ServerName}
	var names, fields []string
	if c.CA != "" {
		names, fields = append(names, c.CA), append(fields, "tls.ca")
	}
	if c.Cert != "" {
		names, fields = append(names, c.Cert, c.Key), append(fields, "tls.cert", "tls.key")
	}
	data, _, err := tlsfile.Read(names)
	if err != nil {
		var re *tlsfile.ReadError
		if errors.As(err, &re) {
			return nil, badField(fields[re.Index], fmt.Sprintf("%q", re.Name), err.Error())
		}
		return nil, err
	}
	i := 0
	if c.CA != "" {
		if conf.RootCAs, _, err = tlsfile.ParseCAs(data[0]); err != nil {
			return nil, badField("tls.ca", fmt.Sprintf("%q", c.CA), tlsMsg(err))
		}
		i = 1
	}
	if c.Cert != "" {
		pair, err := tlsfile.ParsePair(data[i], data[i+1])
		if err != nil {
			var te *tlsfile.Error
			if errors.As(err, &te) && te.Input == tlsfile.InputKey {
				return nil, badField("tls.key", fmt.Sprintf("%q", c.Key), tlsMsg(err))
			}
			return nil, badField("tls.cert", fmt.Sprintf("%q", c.Cert), tlsMsg(err))
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

func tlsMsg(err error) string {
	var te *tlsfile.Error
	if errors.As(err, &te) {
		return te.Msg
	}
	return err.Error()
}

// credentials returns the ACL user and password: each configured value,
// or, when only its file is given, the file's first line by
// secret.Resolve's rules. A loader that resolved the files already
// (secret.Resolve on the whole configuration) has set the values, and
// nothing is read again here; a Config built in Go with only the files
// set works alike.
func (c *Config) credentials() (user, pass secret.String, err error) {
	r := struct {
		Username     secret.String `yaml:"username"`
		UsernameFile string        `yaml:"username_file"`
		Password     secret.String `yaml:"password"`
		PasswordFile string        `yaml:"password_file"`
	}{Username: c.Username, Password: c.Password}
	if c.Username == "" {
		r.UsernameFile = c.UsernameFile
	}
	if c.Password == "" {
		r.PasswordFile = c.PasswordFile
	}
	if err := secret.Resolve(&r); err != nil {
		return "", "", err
	}
	return r.Username, r.Password, nil
}
