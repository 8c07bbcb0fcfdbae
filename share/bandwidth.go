// SPDX-License-Identifier: Apache-2.0

package share

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Bandwidth is a rate in bytes per second. Its zero value is 0 B/s.
//
// In YAML and text it is written as a plain number of bytes per second
// ("100000", "1e5") or a number with a byte unit, optionally followed by
// "/s": B, kB or KB, MB, GB, TB (powers of 1000) and KiB, MiB, GiB, TiB
// (powers of 1024). So "100KB", "100 KB/s" and "100000" are all 100,000
// bytes per second, and "8MiB" is 8,388,608 bytes per second. The prefix
// letter is case-insensitive, but the B must be a capital: "kb" and "Mb"
// are refused because they read as kilo- and megabits. The number must be
// finite and ≥ 0.
type Bandwidth float64

// Bytes returns b in bytes per second as a float64.
func (b Bandwidth) Bytes() float64 { return float64(b) }

// String returns b with the largest decimal unit that keeps the number ≥ 1,
// such as "100KB/s" or "1.5MB/s". ParseBandwidth reads it back, though the
// printed number may be rounded; MarshalText is the exact form.
func (b Bandwidth) String() string {
	v := float64(b)
	units := []struct {
		name string
		mult float64
	}{{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}}
	for _, u := range units {
		if math.Abs(v) >= u.mult {
			return strconv.FormatFloat(v/u.mult, 'g', 6, 64) + u.name + "/s"
		}
	}
	return strconv.FormatFloat(v, 'g', 6, 64) + "B/s"
}

// MarshalText writes b as an exact plain number of bytes per second.
func (b Bandwidth) MarshalText() ([]byte, error) {
	return []byte(strconv.FormatFloat(float64(b), 'g', -1, 64)), nil
}

// UnmarshalText parses text with ParseBandwidth.
func (b *Bandwidth) UnmarshalText(text []byte) error {
	v, err := ParseBandwidth(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// UnmarshalYAML parses a YAML scalar (a string or a number) with
// ParseBandwidth.
func (b *Bandwidth) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: bandwidth must be a scalar such as 100KB or 8MiB/s", n.Line)
	}
	v, err := ParseBandwidth(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

// bandwidthUnits lists the accepted units, matched case-sensitively after
// the prefix letter has been upper-cased (see ParseBandwidth). Longest
// first, so "KiB" is tried before "B".
var bandwidthUnits = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// ParseBandwidth parses a bandwidth in bytes per second (see Bandwidth for
// the syntax). The error quotes the input and says what is accepted.
func ParseBandwidth(s string) (Bandwidth, error) {
	fail := func(why string) (Bandwidth, error) {
		return 0, fmt.Errorf("bandwidth %q: %s (write bytes per second such as 100000, 100KB, 100KB/s or 8MiB)", s, why)
	}
	t := strings.TrimSpace(s)
	if rest, ok := strings.CutSuffix(t, "/s"); ok {
		t = strings.TrimSpace(rest)
	}
	// Split the number from the unit: the unit is the trailing run of
	// letters.
	i := len(t)
	for i > 0 && isLetter(t[i-1]) {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), t[i:]
	if num == "" {
		return fail("missing number")
	}
	for j := 0; j < len(num); j++ {
		c := num[j]
		if (c < '0' || c > '9') && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-' {
			return fail(fmt.Sprintf("unexpected character %q in the number", c))
		}
	}
	// A unit ending in "e"/"E" was taken as a letter; numbers like "1e5"
	// have a digit after the e, so they never end in a letter.
	mult := 1.0
	if unit != "" {
		u := unit
		if len(u) >= 2 { // upper-case the prefix letter: kB, kiB, mb -> KB, KiB, MB
			u = strings.ToUpper(u[:1]) + u[1:]
		}
		found := false
		for _, cand := range bandwidthUnits {
			if u == cand.suffix {
				mult, found = cand.mult, true
				break
			}
		}
		if !found {
			if strings.HasSuffix(unit, "b") || strings.Contains(strings.ToLower(unit), "bit") || strings.Contains(strings.ToLower(unit), "bps") {
				return fail(fmt.Sprintf("unit %q reads as bits (lower-case b); only bytes (B, KB, KiB, MB, MiB, GB, GiB, TB, TiB) are accepted", unit))
			}
			return fail(fmt.Sprintf("unknown unit %q; accepted: B, KB, KiB, MB, MiB, GB, GiB, TB, TiB, optionally followed by /s", unit))
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if errors.Is(err, strconv.ErrRange) {
		return fail("out of range; must be finite")
	}
	if err != nil {
		return fail("not a number")
	}
	v *= mult
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fail("must be finite")
	}
	if v < 0 {
		return fail("must be >= 0")
	}
	if v == 0 {
		v = 0 // no negative zero
	}
	return Bandwidth(v), nil
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
