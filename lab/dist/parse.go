// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration parses a distribution of durations in the text syntax (see
// the package doc) and returns it in seconds. Values are Go durations
// ("20ms", "0.7s", "1m30s") or plain numbers of seconds ("0.02"); SIGMA and
// ALPHA are plain numbers.
func ParseDuration(s string) (Dist, error) { return parse(s, durationValue) }

// ParseSize parses a distribution of sizes in the text syntax (see the
// package doc) and returns it in bytes. Values are plain numbers of bytes
// ("1500") or numbers with a unit: B, KB, MB, GB, TB (powers of 1000) or
// KiB, MiB, GiB, TiB (powers of 1024), case-insensitive ("10KB" = 10000,
// "1MiB" = 1048576). SIGMA and ALPHA are plain numbers.
func ParseSize(s string) (Dist, error) { return parse(s, sizeValue) }

// valueParser reads one value token (a duration or a size) as a float64.
type valueParser struct {
	what string // "duration" or "size", for error messages
	eg   string // an example, for error messages
	fn   func(string) (float64, error)
}

var durationValue = valueParser{what: "duration", eg: "20ms, 0.7s or 0.02 (seconds)", fn: parseSeconds}

var sizeValue = valueParser{what: "size", eg: "1500, 10KB or 1MiB", fn: parseBytes}

// parseSeconds reads a Go duration or a plain number of seconds.
func parseSeconds(tok string) (float64, error) {
	if v, err := strconv.ParseFloat(tok, 64); err == nil {
		return v, nil
	}
	d, err := time.ParseDuration(tok)
	if err != nil {
		return 0, err
	}
	return d.Seconds(), nil
}

// sizeUnits lists the accepted size suffixes, longest first so that "KiB"
// is tried before "B".
var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"b", 1},
}

// parseBytes reads a plain number of bytes or a number with a size unit.
func parseBytes(tok string) (float64, error) {
	lower := strings.ToLower(tok)
	mult := 1.0
	for _, u := range sizeUnits {
		if strings.HasSuffix(lower, u.suffix) {
			lower = strings.TrimSpace(strings.TrimSuffix(lower, u.suffix))
			mult = u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(lower, 64)
	if err != nil {
		return 0, err
	}
	return v * mult, nil
}

// kindSpec describes the positional parameters of one distribution kind.
type kindSpec struct {
	params []string // parameter names, in order
	plain  []bool   // true where the parameter is a plain number
	make   func(p []float64) (Dist, error)
}

var kinds = map[string]kindSpec{
	"exp": {[]string{"MEAN"}, []bool{false}, func(p []float64) (Dist, error) {
		return NewExponential(p[0])
	}},
	"det": {[]string{"V"}, []bool{false}, func(p []float64) (Dist, error) {
		return NewDeterministic(p[0])
	}},
	"lognormal": {[]string{"MEAN", "SIGMA"}, []bool{false, true}, func(p []float64) (Dist, error) {
		return NewLogNormal(p[0], p[1])
	}},
	"pareto": {[]string{"MIN", "MAX", "ALPHA"}, []bool{false, false, true}, func(p []float64) (Dist, error) {
		return NewBoundedPareto(p[0], p[1], p[2])
	}},
	"uniform": {[]string{"A", "B"}, []bool{false, false}, func(p []float64) (Dist, error) {
		return NewUniform(p[0], p[1])
	}},
}

// kindList is the accepted kinds, for error messages.
const kindList = "exp, det, lognormal, pareto or uniform"

func parse(s string, vp valueParser) (Dist, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("distribution %q: %s", s, fmt.Sprintf(format, args...))
	}
	name, rest, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return nil, fail("expected KIND:PARAMS with KIND one of %s (for example exp:20ms)", kindList)
	}
	name = strings.ToLower(strings.TrimSpace(name))
	spec, ok := kinds[name]
	if !ok {
		return nil, fail("unknown kind %q: expected %s", name, kindList)
	}
	usage := name + ":" + strings.Join(spec.params, ",") + "[,max=CAP]"
	toks := strings.Split(rest, ",")
	var p []float64
	capAt := math.NaN()
	for i, raw := range toks {
		tok := strings.TrimSpace(raw)
		if key, val, isOpt := strings.Cut(tok, "="); isOpt {
			key = strings.ToLower(strings.TrimSpace(key))
			val = strings.TrimSpace(val)
			if key != "max" {
				return nil, fail("unknown option %q: the only option is max=CAP", tok)
			}
			if !math.IsNaN(capAt) {
				return nil, fail("option %q given twice", tok)
			}
			v, err := vp.fn(val)
			if err != nil || math.IsNaN(v) {
				return nil, fail("max = %q: expected a %s like %s", val, vp.what, vp.eg)
			}
			capAt = v
			continue
		}
		if !math.IsNaN(capAt) {
			return nil, fail("parameter %q after max=: options must come last (%s)", tok, usage)
		}
		if len(p) == len(spec.params) {
			return nil, fail("unexpected extra parameter %q (token %d): expected %s", tok, i+1, usage)
		}
		param := spec.params[len(p)]
		if tok == "" {
			return nil, fail("%s is empty: expected %s", param, usage)
		}
		var v float64
		var err error
		if spec.plain[len(p)] {
			v, err = strconv.ParseFloat(tok, 64)
			if err != nil || math.IsNaN(v) {
				return nil, fail("%s = %q: expected a plain number like 1.5", param, tok)
			}
		} else {
			v, err = vp.fn(tok)
			if err != nil || math.IsNaN(v) {
				return nil, fail("%s = %q: expected a %s like %s", param, tok, vp.what, vp.eg)
			}
		}
		p = append(p, v)
	}
	if len(p) < len(spec.params) {
		return nil, fail("missing %s: expected %s", spec.params[len(p)], usage)
	}
	d, err := spec.make(p)
	if err != nil {
		return nil, fail("%v", err)
	}
	if !math.IsNaN(capAt) {
		c, err := NewCapped(d, capAt)
		if err != nil {
			return nil, fail("%v", err)
		}
		d = c
	}
	if err := checkMean(d); err != nil {
		return nil, fail("%v", err)
	}
	return d, nil
}
