// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/netprefix"
)

// Defaults of the connection policer (docs/algorithms.md §1).
const (
	// DefaultRate is the initial token rate of the global bucket, in
	// connections per second.
	DefaultRate = 1000.0
	// DefaultBurst is the size of the global bucket, in connections.
	DefaultBurst = 20
	// DefaultMaxTracked is the default cap on per-address buckets
	// (SourceConfig.MaxTracked). At about 100 bytes per tracked address
	// the table stays under 7 MB.
	DefaultMaxTracked = 65536
	// MaxMaxTracked is the largest accepted SourceConfig.MaxTracked.
	MaxMaxTracked = 1 << 24
)

// Bounds of a finite positive per-source limit. They keep the bucket
// arithmetic (int64 nanoseconds) far from overflow.
const (
	minSourceRate  = 0.001 // connections per second
	maxSourceRate  = 1e9
	maxSourceBurst = 1_000_000
)

// Config configures a Policer. Start from DefaultConfig; decode YAML or
// JSON over it, then call Validate (New does).
type Config struct {
	// Rate is the initial token rate of the global bucket in connections
	// per second (default 1000). It must be finite and ≥ 0, or +Inf to
	// admit every connection the per-source rules admit. A controller
	// changes it later with Policer.SetRate.
	Rate float64 `yaml:"rate" json:"rate"`
	// Burst is the size of the global bucket in connections (default 20):
	// the most connections admitted at one instant.
	Burst int `yaml:"burst" json:"burst"`
	// Sources configures per-source-address policing (network-level
	// differentiation). Its zero value polices no source individually.
	Sources SourceConfig `yaml:"sources" json:"sources"`
}

// SourceConfig configures per-source-address policing. A connection whose
// source address matches a rule (longest prefix first) is policed by that
// rule's bucket; an unlisted source is policed by Default, or only by the
// global bucket when Default is nil. A connection must pass its source
// bucket and then the global bucket; a source-bucket refusal does not take
// a global token.
type SourceConfig struct {
	// Default is the limit of every unlisted source address, one bucket
	// per address; nil (the default) leaves unlisted sources to the global
	// bucket alone.
	Default *SourceLimit `yaml:"default" json:"default"`
	// Rules are rates for listed addresses and CIDR prefixes. The longest
	// matching prefix wins; two rules may not name the same prefix.
	Rules []SourceRule `yaml:"rules" json:"rules"`
	// MaxTracked caps the number of per-address buckets kept (default
	// 65536, at most 2^24). When the table is full, the bucket of the
	// least recently seen address is reused; see Policer for what that
	// costs.
	MaxTracked int `yaml:"max_tracked" json:"max_tracked"`
}

// SourceLimit is a token bucket for one source: Rate connections per
// second, at most Burst at one instant.
//
// Rate 0 refuses every connection from the source (a deny rule); Rate +Inf
// exempts the source from per-source policing (an allow rule; it still
// needs a global token) and keeps no state for it. Burst must be ≥ 1 for a
// finite positive Rate and is ignored otherwise.
type SourceLimit struct {
	Rate  float64 `yaml:"rate" json:"rate"`
	Burst int     `yaml:"burst" json:"burst"`
}

// SourceRule is the limit of the source addresses within one prefix.
type SourceRule struct {
	// Prefix is a CIDR prefix ("203.0.113.0/24", "2001:db8::/32") or a
	// single address ("192.0.2.7", the same as "192.0.2.7/32"). Host bits
	// must be zero. IPv4-mapped IPv6 sources (::ffff:a.b.c.d) are matched
	// as the IPv4 address they carry.
	Prefix string `yaml:"prefix" json:"prefix"`
	// Rate and Burst are the rule's bucket, as in SourceLimit: Rate in
	// connections per second (0 denies, +Inf exempts), Burst in
	// connections.
	Rate  float64 `yaml:"rate" json:"rate"`
	Burst int     `yaml:"burst" json:"burst"`
	// PerAddress gives every address within Prefix its own bucket of this
	// limit (kept in the bounded table); false (the default) makes one
	// bucket shared by the whole prefix.
	PerAddress bool `yaml:"per_address" json:"per_address"`
}

// DefaultConfig returns the paper's connection policer: bucket 20, initial
// rate 1000 connections/s, no per-source policing.
func DefaultConfig() Config {
	return Config{Rate: DefaultRate, Burst: DefaultBurst, Sources: SourceConfig{MaxTracked: DefaultMaxTracked}}
}

func badField(field string, v any, want string) error { return fielderr.Invalid(field, v, want) }

// Validate reports the first invalid field, naming its YAML path and value.
func (c *Config) Validate() error {
	if math.IsNaN(c.Rate) || c.Rate < 0 || math.IsInf(c.Rate, -1) {
		return badField("rate", c.Rate, "must be finite and >= 0 (connections per second), or +Inf")
	}
	if c.Burst < 1 {
		return badField("burst", c.Burst, "must be >= 1 (connections)")
	}
	_, err := c.Sources.compile()
	return err
}

// usesTable reports whether any source gets its own per-address bucket.
func (s *SourceConfig) usesTable() bool {
	if s.Default != nil && s.Default.stateful() {
		return true
	}
	for _, r := range s.Rules {
		if r.PerAddress && r.limit().stateful() {
			return true
		}
	}
	return false
}

// limit returns the rule's bucket.
func (r SourceRule) limit() SourceLimit { return SourceLimit{Rate: r.Rate, Burst: r.Burst} }

func (l SourceLimit) stateful() bool { return l.Rate > 0 && !math.IsInf(l.Rate, 1) }

func (l SourceLimit) validate(field string) error {
	if math.IsNaN(l.Rate) || l.Rate < 0 || math.IsInf(l.Rate, -1) {
		return badField(field+".rate", l.Rate, "must be finite and >= 0 (connections per second; 0 denies), or +Inf (exempt)")
	}
	if !l.stateful() {
		return nil
	}
	if l.Rate < minSourceRate || l.Rate > maxSourceRate {
		return badField(field+".rate", l.Rate, fmt.Sprintf("a finite positive rate must be in [%g, %g] connections per second", minSourceRate, maxSourceRate))
	}
	if l.Burst < 1 || l.Burst > maxSourceBurst {
		return badField(field+".burst", l.Burst, fmt.Sprintf("must be in [1, %d] (connections) when the rate is finite and positive", maxSourceBurst))
	}
	return nil
}

// compile validates s and builds its table of rule prefixes (prefix →
// rule index).
func (s *SourceConfig) compile() (*netprefix.Table[int], error) {
	if s.Default != nil {
		if err := s.Default.validate("sources.default"); err != nil {
			return nil, err
		}
	}
	m := &netprefix.Table[int]{}
	for i, r := range s.Rules {
		field := fmt.Sprintf("sources.rules[%d]", i)
		p, err := netprefix.Parse(r.Prefix)
		if err != nil {
			return nil, badField(field+".prefix", fmt.Sprintf("%q", r.Prefix), err.Error())
		}
		if j, added := m.Insert(p, i); !added {
			return nil, badField(field+".prefix", fmt.Sprintf("%q", r.Prefix), fmt.Sprintf("the same prefix as sources.rules[%d]", j))
		}
		if err := r.limit().validate(field); err != nil {
			return nil, err
		}
	}
	if s.MaxTracked < 0 || s.MaxTracked > MaxMaxTracked {
		return nil, badField("sources.max_tracked", s.MaxTracked, fmt.Sprintf("must be in [0, %d]", MaxMaxTracked))
	}
	if s.MaxTracked == 0 && s.usesTable() {
		return nil, badField("sources.max_tracked", s.MaxTracked, "must be >= 1 when a source has its own bucket (sources.default or a per_address rule)")
	}
	return m, nil
}
