// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Weighted is a name with a relative weight, as written in
// "gold:0.2,bronze:0.8". Weights are relative: a list is normalised by its
// sum before use, so "a:1,b:3" and "a:0.25,b:0.75" mean the same.
type Weighted struct {
	// Name is the class, client, path or URL the weight belongs to.
	Name string
	// Weight is positive and finite.
	Weight float64
}

// ParseWeighted parses a comma-separated list of name:weight entries. An
// entry without ":" has weight 1. The weight is the text after the last
// ":" unless that text contains "/" (then the ":" belongs to a URL), so
// "http://127.0.0.1:8080/a:3" is the URL with weight 3; an absolute URL
// must have a path, so that its port is not read as a weight. Names must be
// non-empty and distinct; weights positive and finite. field names the flag
// or config field in error messages.
func ParseWeighted(field, s string) ([]Weighted, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%s: empty list", field)
	}
	var out []Weighted
	seen := map[string]bool{}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("%s: entry %d of %q is empty", field, i+1, s)
		}
		name, w := part, 1.0
		if j := strings.LastIndexByte(part, ':'); j >= 0 && !strings.Contains(part[j+1:], "/") {
			name = strings.TrimSpace(part[:j])
			ws := strings.TrimSpace(part[j+1:])
			v, err := strconv.ParseFloat(ws, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: entry %q: weight %q is not a number", field, part, ws)
			}
			w = v
		}
		if name == "" {
			return nil, fmt.Errorf("%s: entry %q has an empty name", field, part)
		}
		if k := strings.Index(name, "://"); k >= 0 && !strings.Contains(name[k+3:], "/") {
			return nil, fmt.Errorf("%s: entry %q: an absolute URL in a list needs a path (e.g. http://127.0.0.1:8080/), so that its port is not read as a weight", field, part)
		}
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("%s: entry %q: weight %v must be positive and finite", field, part, w)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: name %q appears twice", field, name)
		}
		seen[name] = true
		out = append(out, Weighted{Name: name, Weight: w})
	}
	return out, nil
}

// maxSourceAddrs bounds the number of source addresses (one transport each).
const maxSourceAddrs = 1024

// ParseAddrs parses a comma-separated list of IPv4 loopback addresses and
// inclusive ranges, e.g. "127.0.0.2-127.0.0.5,127.0.1.1". Every address must
// be in 127.0.0.0/8; at most 1024 addresses; no duplicates. field names the
// flag in error messages.
func ParseAddrs(field, s string) ([]netip.Addr, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%s: empty list", field)
	}
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	add := func(a netip.Addr) error {
		if seen[a] {
			return fmt.Errorf("%s: address %s appears twice", field, a)
		}
		if len(out) >= maxSourceAddrs {
			return fmt.Errorf("%s: more than %d addresses", field, maxSourceAddrs)
		}
		seen[a] = true
		out = append(out, a)
		return nil
	}
	parse := func(t string) (netip.Addr, error) {
		a, err := netip.ParseAddr(strings.TrimSpace(t))
		if err != nil {
			return netip.Addr{}, fmt.Errorf("%s: %q is not an IP address", field, t)
		}
		if !a.Is4() || !a.IsLoopback() {
			return netip.Addr{}, fmt.Errorf("%s: %s is not in 127.0.0.0/8 (only loopback sources are allowed)", field, a)
		}
		return a, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parse(lo)
		if err != nil {
			return nil, err
		}
		if !isRange {
			if err := add(a); err != nil {
				return nil, err
			}
			continue
		}
		b, err := parse(hi)
		if err != nil {
			return nil, err
		}
		if b.Less(a) {
			return nil, fmt.Errorf("%s: range %q ends before it starts", field, strings.TrimSpace(part))
		}
		for x := a; ; x = x.Next() {
			if err := add(x); err != nil {
				return nil, err
			}
			if x == b {
				break
			}
		}
	}
	return out, nil
}

// CheckLoopbackURL returns an error unless raw is an absolute http or https
// URL whose host is "localhost", an address in 127.0.0.0/8 or ::1. The load
// generator never sends traffic anywhere else. field names the flag.
func CheckLoopbackURL(field, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a URL: %v", field, raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%s: %q: scheme must be http or https", field, raw)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("%s: %q has no host", field, raw)
	}
	if !isLoopbackHost(host) {
		return nil, fmt.Errorf("%s: %q: host %q is not a loopback address (127.0.0.0/8, ::1 or localhost); sluice-lab load only sends traffic to this machine", field, raw, host)
	}
	return u, nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// picker draws an index with probability proportional to its weight.
type picker struct {
	cum []float64 // cumulative normalised weights; last element is 1
}

func newPicker(weights []float64) picker {
	cum := make([]float64, len(weights))
	var sum float64
	for _, w := range weights {
		sum += w
	}
	acc := 0.0
	for i, w := range weights {
		acc += w
		cum[i] = acc / sum
	}
	if len(cum) > 0 {
		cum[len(cum)-1] = 1
	}
	return picker{cum: cum}
}

// pick maps u in [0,1) to an index.
func (p picker) pick(u float64) int {
	i := sort.SearchFloat64s(p.cum, u)
	// SearchFloat64s finds the first cum >= u; a u exactly on a boundary
	// belongs to the next bucket.
	for i < len(p.cum)-1 && p.cum[i] <= u {
		i++
	}
	if i >= len(p.cum) {
		i = len(p.cum) - 1
	}
	return i
}

func weightsOf(ws []Weighted) []float64 {
	out := make([]float64, len(ws))
	for i, w := range ws {
		out[i] = w.Weight
	}
	return out
}

// goldenFrac is the fractional part of the golden ratio. The sequence
// frac(i·goldenFrac) is evenly spread over [0,1) at every prefix, so users
// assigned to classes by it follow the weights closely even while a user
// schedule ramps up.
const goldenFrac = 0.6180339887498949

func lowDiscrepancy(i int) float64 {
	_, f := math.Modf(float64(i+1) * goldenFrac)
	return f
}
