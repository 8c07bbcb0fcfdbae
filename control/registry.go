// SPDX-License-Identifier: Apache-2.0

package control

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

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

// WithDefaults returns a copy of c in which every field left at zero,
// where zero is not a valid setting of it, holds its default: the value
// it has in the registry's configuration of the same type (NewConfig),
// nested structs field by field. So a Go literal with only the fields
// that matter, such as &auto.Config{SLO: 250 * time.Millisecond}, gets
// the defaults of its period, limits and windows instead of being
// refused. A field whose zero is itself a setting (a bool, envoy-gradient's
// jitter, voigt-queue's kd) is used as given: a literal that wants
// such a field's non-zero default sets it, or starts from the
// Default…Config function. c itself is returned when it is nil or not a
// registered configuration.
func WithDefaults(c Config) Config {
	v := reflect.ValueOf(c)
	if c == nil || v.Kind() != reflect.Pointer || v.IsNil() {
		return c
	}
	for _, mk := range registry {
		def := mk()
		dv := reflect.ValueOf(def)
		if dv.Type() != v.Type() {
			continue
		}
		cp := reflect.New(v.Type().Elem())
		cp.Elem().Set(v.Elem())
		for _, path := range zeroInvalid(mk) {
			if f := cp.Elem().FieldByIndex(path); f.IsZero() {
				f.Set(dv.Elem().FieldByIndex(path))
			}
		}
		return cp.Interface().(Config)
	}
	return c
}

// zeroInvalid returns the index paths of the fields (nested structs field
// by field; not bools) of mk's configuration that have a non-zero default and whose
// zero Validate refuses in an otherwise default configuration; cached by
// type.
func zeroInvalid(mk func() Config) [][]int {
	t := reflect.TypeOf(mk())
	if p, ok := zeroInvalidCache.Load(t); ok {
		return p.([][]int)
	}
	var out [][]int
	var walk func(path []int)
	walk = func(path []int) {
		c := mk()
		f := reflect.ValueOf(c).Elem().FieldByIndex(path)
		if f.Kind() == reflect.Struct {
			for i := range f.NumField() {
				if f.Type().Field(i).IsExported() {
					walk(append(path[:len(path):len(path)], i))
				}
			}
			return
		}
		if f.IsZero() || f.Kind() == reflect.Bool {
			return // a bool's false is a setting, whatever Validate says of it alone
		}
		f.Set(reflect.Zero(f.Type()))
		if c.Validate() != nil {
			out = append(out, path)
		}
	}
	top := t.Elem()
	for i := range top.NumField() {
		if top.Field(i).IsExported() {
			walk([]int{i})
		}
	}
	zeroInvalidCache.Store(t, out)
	return out
}

// zeroInvalidCache maps a configuration's type to its zeroInvalid paths.
var zeroInvalidCache sync.Map
