// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"errors"
	"os"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/secret"
	"github.com/sluicehq/sluice/internal/strictyaml"
)

// ConfigError is an error in a configuration file, located by line and
// field path: "proxy.yaml:14: stages[1].params.target: -1s is invalid:
// must be a positive duration". Its fields are File, Line (1-based, 0 if
// unknown), Path ("backends.servers[0].url", "" if unknown) and Msg; it
// is the form every sluice file reader reports (internal/strictyaml).
type ConfigError = strictyaml.FileError

// LoadFile reads, decodes, defaults and validates the configuration file
// at path. Every error is a *ConfigError naming the file, line and field.
func LoadFile(path string) (*Config, error) {
	return strictyaml.ReadFile(path, Parse)
}

// Parse decodes data (the contents of the file called name) strictly:
// unknown keys and durations without a unit are errors. It then reads
// every secret's file form (admin.token_file, telemetry.otlp.headers_file,
// shares.clients[].api_keys_file, ...: package internal/secret), sets the
// defaults and validates. Every error is a *ConfigError, and none shows
// a secret's value.
func Parse(name string, data []byte) (*Config, error) {
	return parse(name, data, os.ReadFile)
}

// parse is Parse reading the secret files with read.
func parse(name string, data []byte, read func(string) ([]byte, error)) (*Config, error) {
	var cfg Config
	root, err := strictyaml.DecodeFile(name, data, &cfg, "listeners and backends are required (listeners:, backends:, stages: ...)")
	if err != nil {
		return nil, hideSecretValue(err)
	}
	cfg.SetDefaults()
	err = secret.ResolveWith(&cfg, read)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return nil, strictyaml.Locate(name, root, err)
	}
	return &cfg, nil
}

// ResolveSecrets reads the file form of every secret of c (admin.token_file,
// telemetry.otlp.headers_file, shares.clients[].api_keys_file, ...) into
// the secret. Parse and LoadFile call it, and Reload reads the files again;
// a Go program that builds a Config with a _file field set calls it
// before Validate. Its errors are *sluice.FieldError naming the field and
// the file, never a secret's value.
func (c *Config) ResolveSecrets() error { return secret.Resolve(c) }

// secretTypeName is how the decoder's type errors name a secret's Go
// type ("cannot unmarshal "…" (a string) into map[string]secret.String").
var secretTypeName = reflect.TypeOf(secret.String("")).String()

// hideSecretValue rewrites a decoding error about a secret field, which
// quotes the value it could not decode (a "key=value" string given
// where headers take a mapping, say), so that it shows what was expected
// and not the value.
func hideSecretValue(err error) error {
	var fe *ConfigError
	if !errors.As(err, &fe) || !strings.Contains(fe.Msg, secretTypeName) {
		return err
	}
	want := "a string"
	switch {
	case strings.Contains(fe.Msg, "map[string]"+secretTypeName):
		want = "a mapping of names to values"
	case strings.Contains(fe.Msg, "[]"+secretTypeName):
		want = "a list of strings"
	}
	out := *fe
	out.Msg = "a secret must be " + want + " (the value given is not shown), or name a file with its _file form"
	return &out
}

// LocateError places an error about a loaded configuration (a
// *sluice.FieldError from Listen, such as an address that cannot be bound) in
// its file: the result is a *ConfigError naming the file, the line of the
// field and the field. Other errors, and a file that cannot be read
// again, get the file name only.
func LocateError(file string, err error) error {
	var root *yaml.Node
	if data, rerr := os.ReadFile(file); rerr == nil {
		root = strictyaml.ParseRoot(data)
	}
	return strictyaml.Locate(file, root, err)
}
