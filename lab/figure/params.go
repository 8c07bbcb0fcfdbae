// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
)

// Param describes one scenario parameter for listings: its name, its
// type, its default value as text and its documentation.
type Param struct {
	// Name is the snake_case name used with --set.
	Name string
	// Type is a short description of the accepted values ("duration",
	// "float", "int", "one of exp|det", "list of floats", "schedule").
	Type string
	// Default is the default value in the --set syntax.
	Default string
	// Doc explains the parameter, with its unit, and why the default was
	// chosen when the paper does not give it.
	Doc string
}

// Params is the set of parameters a scenario declares, in the manner of
// flag.FlagSet: each declaration binds a typed variable, sets it to its
// default, and Set parses a value into it by name.
//
// Params is not safe for concurrent use.
type Params struct {
	scenario string
	defs     []Param
	set      map[string]func(string) error
	err      error // first declaration error (duplicate name, bad default)
}

// NewParams returns an empty parameter set for the named figure (its name
// prefixes every error).
func NewParams(scenario string) *Params {
	return &Params{scenario: scenario, set: make(map[string]func(string) error)}
}

// List returns the declared parameters in declaration order.
func (ps *Params) List() []Param { return slices.Clone(ps.defs) }

// Names returns the declared parameter names, sorted.
func (ps *Params) Names() []string {
	names := make([]string, len(ps.defs))
	for i, d := range ps.defs {
		names[i] = d.Name
	}
	slices.Sort(names)
	return names
}

// Set parses value into the parameter called name. An unknown name is an
// error listing the valid ones; a bad value is an error naming the
// parameter and the value.
func (ps *Params) Set(name, value string) error {
	f, ok := ps.set[name]
	if !ok {
		return fmt.Errorf("scenario %s: unknown parameter %q (valid: %s)", ps.scenario, name, strings.Join(ps.Names(), ", "))
	}
	if err := f(value); err != nil {
		return fmt.Errorf("scenario %s: parameter %s=%q: %w", ps.scenario, name, value, err)
	}
	return nil
}

// SetAll applies "key=value" assignments in order.
func (ps *Params) SetAll(assignments []string) error {
	for _, a := range assignments {
		k, v, ok := strings.Cut(a, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("scenario %s: --set %q: want key=value", ps.scenario, a)
		}
		if err := ps.Set(k, strings.TrimSpace(v)); err != nil {
			return err
		}
	}
	return nil
}

// declare registers a parameter. A duplicate or badly formed name is a
// mistake in the scenario's code; it is kept in Err and makes Prepare fail.
func (ps *Params) declare(name, typ, def, doc string, set func(string) error) {
	if _, dup := ps.set[name]; dup {
		ps.fail(fmt.Errorf("scenario %s: parameter %q declared twice", ps.scenario, name))
	}
	if !paramName.MatchString(name) {
		ps.fail(fmt.Errorf("scenario %s: parameter name %q is not snake_case", ps.scenario, name))
	}
	ps.defs = append(ps.defs, Param{Name: name, Type: typ, Default: def, Doc: doc})
	ps.set[name] = set
}

func (ps *Params) fail(err error) {
	if ps.err == nil {
		ps.err = err
	}
}

// Err returns the first declaration error, or nil.
func (ps *Params) Err() error { return ps.err }

var paramName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Float declares a float64 parameter that must lie in [min, max].
func (ps *Params) Float(p *float64, name string, def, min, max float64, doc string) {
	*p = def
	ps.declare(name, fmt.Sprintf("float in [%s, %s]", fmtNum(min), fmtNum(max)), fmtNum(def), doc, func(s string) error {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) {
			return fmt.Errorf("not a number")
		}
		if v < min || v > max {
			return fmt.Errorf("must be within [%s, %s]", fmtNum(min), fmtNum(max))
		}
		*p = v
		return nil
	})
}

// Int declares an int parameter that must lie in [min, max].
func (ps *Params) Int(p *int, name string, def, min, max int, doc string) {
	*p = def
	ps.declare(name, fmt.Sprintf("int in [%d, %d]", min, max), strconv.Itoa(def), doc, func(s string) error {
		v, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		if v < min || v > max {
			return fmt.Errorf("must be within [%d, %d]", min, max)
		}
		*p = v
		return nil
	})
}

// Duration declares a duration parameter in [min, max]. Values are Go
// durations ("2.8s", "150ms") or plain numbers of seconds ("0.1").
func (ps *Params) Duration(p *time.Duration, name string, def, min, max time.Duration, doc string) {
	*p = def
	ps.declare(name, fmt.Sprintf("duration in [%v, %v]", min, max), def.String(), doc, func(s string) error {
		v, err := parseDuration(s)
		if err != nil {
			return err
		}
		if v < min || v > max {
			return fmt.Errorf("must be within [%v, %v]", min, max)
		}
		*p = v
		return nil
	})
}

// Choice declares a string parameter that must be one of choices.
func (ps *Params) Choice(p *string, name, def string, choices []string, doc string) {
	*p = def
	ps.declare(name, "one of "+strings.Join(choices, "|"), def, doc, func(s string) error {
		if !slices.Contains(choices, s) {
			return fmt.Errorf("must be one of %s", strings.Join(choices, ", "))
		}
		*p = s
		return nil
	})
}

// Subset declares a comma-separated list of distinct elements of
// choices, at least one, kept in the order given.
func (ps *Params) Subset(p *[]string, name string, def, choices []string, doc string) {
	*p = slices.Clone(def)
	ps.declare(name, "list of "+strings.Join(choices, "|"), strings.Join(def, ","), doc, func(s string) error {
		var out []string
		for _, f := range strings.Split(s, ",") {
			f = strings.TrimSpace(f)
			switch {
			case !slices.Contains(choices, f):
				return fmt.Errorf("%q is not one of %s", f, strings.Join(choices, ", "))
			case slices.Contains(out, f):
				return fmt.Errorf("%q is listed twice", f)
			}
			out = append(out, f)
		}
		*p = out
		return nil
	})
}

// Bool declares a boolean parameter (true/false, 1/0).
func (ps *Params) Bool(p *bool, name string, def bool, doc string) {
	*p = def
	ps.declare(name, "bool", strconv.FormatBool(def), doc, func(s string) error {
		v, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("not a boolean (true or false)")
		}
		*p = v
		return nil
	})
}

// Floats declares a comma-separated list of floats, each in [min, max],
// with at least one element.
func (ps *Params) Floats(p *[]float64, name string, def []float64, min, max float64, doc string) {
	*p = slices.Clone(def)
	txt := make([]string, len(def))
	for i, v := range def {
		txt[i] = fmtNum(v)
	}
	ps.declare(name, fmt.Sprintf("comma-separated floats in [%s, %s]", fmtNum(min), fmtNum(max)), strings.Join(txt, ","), doc, func(s string) error {
		var out []float64
		for i, f := range strings.Split(s, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || math.IsNaN(v) {
				return fmt.Errorf("element %d (%q) is not a number", i+1, f)
			}
			if v < min || v > max {
				return fmt.Errorf("element %d (%s) must be within [%s, %s]", i+1, fmtNum(v), fmtNum(min), fmtNum(max))
			}
			out = append(out, v)
		}
		*p = out
		return nil
	})
}

// Schedule declares a piecewise-constant schedule in dist.ParseSchedule's
// syntax ("0s:3,60s:1000,240s:3").
func (ps *Params) Schedule(p *dist.Schedule, name, def, doc string) {
	v, err := dist.ParseSchedule(def)
	if err != nil {
		ps.fail(fmt.Errorf("scenario %s: default of %s: %w", ps.scenario, name, err))
	}
	*p = v
	ps.declare(name, "schedule OFFSET:VALUE,…", def, doc, func(s string) error {
		v, err := dist.ParseSchedule(s)
		if err != nil {
			return err
		}
		*p = v
		return nil
	})
}

// DurationDist declares a distribution of durations in dist.ParseDuration's
// syntax ("det:5s", "exp:20ms", "uniform:4s,6s"); values are in seconds.
func (ps *Params) DurationDist(p *dist.Dist, name, def, doc string) {
	v, err := dist.ParseDuration(def)
	if err != nil {
		ps.fail(fmt.Errorf("scenario %s: default of %s: %w", ps.scenario, name, err))
	}
	*p = v
	ps.declare(name, "distribution (det:5s, exp:20ms, uniform:4s,6s, …)", def, doc, func(s string) error {
		v, err := dist.ParseDuration(s)
		if err != nil {
			return err
		}
		*p = v
		return nil
	})
}

// parseDuration reads a Go duration or a plain number of seconds.
func parseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("not a duration (use 2.8s, 150ms or a number of seconds)")
	}
	if math.Abs(v) > float64(math.MaxInt64)/1e9 {
		return 0, fmt.Errorf("duration out of range")
	}
	return time.Duration(math.Round(v * 1e9)), nil
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
