// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/internal/strictyaml"
)

// ControllerName returns the registry name of a controller configuration
// (the name StageConfig.Controller takes for it): "auto" for a
// *auto.Config, "seda" for a *control.SEDAConfig, and so on; false
// when c's type is not a registered controller's configuration.
func ControllerName(c control.Config) (string, bool) {
	if c == nil {
		return "", false
	}
	t := reflect.TypeOf(c)
	for _, n := range control.Names() {
		if d, err := control.NewConfig(n); err == nil && reflect.TypeOf(d) == t {
			return n, true
		}
	}
	return "", false
}

// stageControl resolves the controller configuration of stage s (at path
// p): a copy of the Go value s.Control, or the registry's default
// configuration of s.Controller with s.Params decoded over it. Either way
// the caller validates the result the same way.
func stageControl(p string, s *StageConfig) (control.Config, error) {
	if s.Control == nil {
		ctrl, err := control.NewConfig(s.Controller)
		if err != nil {
			return nil, fieldErr(p+".controller", "unknown controller %q (valid: %s)", s.Controller, strings.Join(control.Names(), ", "))
		}
		if err := decodeParams(p+".params", &s.Params, ctrl); err != nil {
			return nil, err
		}
		return ctrl, nil
	}
	name, ok := ControllerName(s.Control)
	switch {
	case !ok:
		return nil, fieldErr(p+".controller", "%T is not the configuration of a registered controller (valid: %s)", s.Control, strings.Join(control.Names(), ", "))
	case s.Controller != name:
		return nil, fieldErr(p+".controller", "%q, but Control holds the configuration of %s: set one of them", s.Controller, name)
	case paramsSet(&s.Params):
		return nil, fieldErr(p+".params", "is set next to Control: give the controller's parameters one way")
	}
	v := reflect.ValueOf(s.Control)
	if v.IsNil() {
		return nil, fieldErr(p+".controller", "Control is a nil %T", s.Control)
	}
	// A copy, with every field left at zero at its default.
	ctrl := control.WithDefaults(s.Control)
	if seda, isSEDA := ctrl.(*control.SEDAConfig); isSEDA {
		def := control.DefaultSEDAConfig()
		if seda.Classes != def.Classes {
			return nil, fieldErr(p+".params.classes", "must not be set in params: it %s", reservedParams["classes"])
		}
		if seda.ClassTargets != nil {
			return nil, fieldErr(p+".params.class_targets", "must not be set in params: it %s", reservedParams["class_targets"])
		}
	}
	return ctrl, nil
}

// forFields calls f with the YAML name of every exported field of the
// structs a and b point to (of the same type) and the two values.
func forFields(a, b control.Config, f func(key string, av, bv reflect.Value)) {
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	t := av.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		key, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if !sf.IsExported() || key == "-" {
			continue
		}
		if key == "" {
			key = strings.ToLower(sf.Name)
		}
		f(key, av.Field(i), bv.Field(i))
	}
}

// paramsSet reports whether a stage's params node holds anything (a null
// or an absent params is unset).
func paramsSet(n *yaml.Node) bool {
	if n == nil || n.Kind == 0 {
		return false
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	n = strictyaml.Resolve(n)
	return !(n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// MarshalYAML writes the stage as a configuration file has it: a stage
// whose controller is the Go value Control gets the controller's name and,
// as params, the fields that differ from the controller's defaults, so
// that the output reads back into the same configuration.
func (s StageConfig) MarshalYAML() (any, error) {
	type plain StageConfig // without this method
	out := plain(s)
	if s.Control == nil || paramsSet(&s.Params) {
		return out, nil
	}
	name, ok := ControllerName(s.Control)
	if !ok || reflect.ValueOf(s.Control).IsNil() {
		return nil, fmt.Errorf("stage %q: %T is not the configuration of a registered controller", s.Name, s.Control)
	}
	out.Controller = name
	def, err := control.NewConfig(name)
	if err != nil {
		return nil, err
	}
	params := map[string]any{}
	forFields(s.Control, def, func(key string, got, want reflect.Value) {
		if !reflect.DeepEqual(got.Interface(), want.Interface()) {
			params[key] = got.Interface()
		}
	})
	if len(params) > 0 {
		if err := out.Params.Encode(params); err != nil {
			return nil, err
		}
	}
	return out, nil
}
