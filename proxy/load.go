package proxy

import (
	"os"

	"gopkg.in/yaml.v3"

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
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{File: path, Msg: err.Error()}
	}
	return Parse(path, data)
}

// Parse decodes data (the contents of the file called name) strictly:
// unknown keys and durations without a unit are errors. It then sets the
// defaults and validates. Every error is a *ConfigError.
func Parse(name string, data []byte) (*Config, error) {
	var cfg Config
	root, err := strictyaml.DecodeFile(name, data, &cfg, "listeners and backends are required (listeners:, backends:, stages: ...)")
	if err != nil {
		return nil, err
	}
	cfg.SetDefaults()
	err = cfg.Admin.readTokenFile()
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return nil, strictyaml.Locate(name, root, err)
	}
	return &cfg, nil
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
