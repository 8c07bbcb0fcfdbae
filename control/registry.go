// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/auto"
)

// Config is a controller configuration: a pointer to one of the XConfig
// structs of this package, filled with defaults, then decoded from a config
// file, then validated and instantiated.
type Config interface {
	// Validate reports the first invalid field, naming it.
	Validate() error
	// New validates the configuration and returns a fresh controller.
	New() (sluice.Controller, error)
}

// registry maps configuration names to constructors of default configs.
var registry = map[string]func() Config{
	"auto":               func() Config { c := auto.DefaultConfig(); return &c },
	"kihl":               func() Config { c := DefaultKihlConfig(); return &c },
	"yaksha":             func() Config { c := DefaultYakshaConfig(); return &c },
	"seda":               func() Config { c := DefaultSEDAConfig(); return &c },
	"voigt-cpu":          func() Config { c := DefaultVoigtCPUConfig(); return &c },
	"voigt-queue":        func() Config { c := DefaultVoigtQueueConfig(); return &c },
	"static-rate":        func() Config { c := DefaultStaticRateConfig(); return &c },
	"static-concurrency": func() Config { c := DefaultStaticConcurrencyConfig(); return &c },
	"none":               func() Config { c := DefaultNoneConfig(); return &c },
	"gradient2":          func() Config { c := DefaultGradient2Config(); return &c },
	"envoy-gradient":     func() Config { c := DefaultEnvoyGradientConfig(); return &c },
	"bbr":                func() Config { c := DefaultBBRConfig(); return &c },
}

// Names returns the registered controller names, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewConfig returns the default configuration of the named controller, as
// a pointer ready to be decoded into. An unknown name is an error listing
// the valid ones.
func NewConfig(name string) (Config, error) {
	mk, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("controller: unknown controller %q (valid: %s)", name, strings.Join(Names(), ", "))
	}
	return mk(), nil
}
