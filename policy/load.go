// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"github.com/sluicehq/sluice/internal/strictyaml"
)

// ConfigError is an error in a policy file, located by line and field
// path: "policy.yaml:9: stages[0].params.target: -1s is invalid: must be
// a positive duration such as 250ms". Its fields are File, Line (1-based,
// 0 if unknown), Path ("" if unknown) and Msg. It is the type of the
// proxy's proxy.ConfigError, so one errors.As serves both.
type ConfigError = strictyaml.FileError

// Load reads the policy file at path and returns its configuration
// decoded, defaulted and validated, as Parse does. Every error is a
// *ConfigError naming the file.
func Load(path string) (*Config, error) {
	return strictyaml.ReadFile(path, Parse)
}

// Parse decodes data, the YAML of a policy (classes, stages, reject,
// shadow, degrade, hops: the policy part of a proxy configuration), read
// from the file called name, strictly: an unknown key, a duration without
// a unit or a value of the wrong type is an error. It then sets the
// defaults (SetDefaults) and validates the result (Validate), every
// stage's params decoded over its controller's defaults. Every error is a
// *ConfigError naming the file, the line and the field; an empty document
// is one (write {} for the default policy: auto on every request).
func Parse(name string, data []byte) (*Config, error) {
	var cfg Config
	root, err := strictyaml.DecodeFile(name, data, &cfg, "write {} for the default policy (auto on every request), or classes:, stages:, reject: ...")
	if err != nil {
		return nil, err
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, strictyaml.Locate(name, root, err)
	}
	return &cfg, nil
}
