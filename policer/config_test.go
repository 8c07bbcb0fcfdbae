// SPDX-License-Identifier: Apache-2.0

package policer

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig invalid: %v", err)
	}
	if c.Rate != 1000 || c.Burst != 20 {
		t.Errorf("DefaultConfig = rate %v burst %d, want the paper's 1000/s and 20", c.Rate, c.Burst)
	}
}

func TestValidate(t *testing.T) {
	inf := math.Inf(1)
	rules := func(r ...SourceRule) Config {
		c := DefaultConfig()
		c.Sources.Rules = r
		return c
	}
	withDefault := func(l SourceLimit, maxTracked int) Config {
		c := DefaultConfig()
		c.Sources.Default = &l
		c.Sources.MaxTracked = maxTracked
		return c
	}
	tests := []struct {
		name  string
		cfg   Config
		field string // "" means valid
		frag  string
	}{
		{"default", DefaultConfig(), "", ""},
		{"rate inf", Config{Rate: inf, Burst: 1}, "", ""},
		{"rate zero", Config{Rate: 0, Burst: 1}, "", ""},
		{"rate NaN", Config{Rate: math.NaN(), Burst: 1}, "rate", "NaN"},
		{"rate negative", Config{Rate: -1, Burst: 1}, "rate", "-1"},
		{"rate -inf", Config{Rate: math.Inf(-1), Burst: 1}, "rate", "-Inf"},
		{"burst zero", Config{Rate: 1, Burst: 0}, "burst", "0"},
		{"good rules", rules(
			SourceRule{Prefix: "10.0.0.0/8", Rate: 5, Burst: 2},
			SourceRule{Prefix: "10.1.2.3", Rate: 0},
			SourceRule{Prefix: "2001:db8::/32", Rate: inf},
		), "", ""},
		{"empty prefix", rules(SourceRule{Rate: 1, Burst: 1}), "sources.rules[0].prefix", "required"},
		{"bad prefix", rules(SourceRule{Prefix: "10.0.0/8", Rate: 1, Burst: 1}), "sources.rules[0].prefix", "10.0.0/8"},
		{"bad address", rules(SourceRule{Prefix: "example.com", Rate: 1, Burst: 1}), "sources.rules[0].prefix", "not an address"},
		{"host bits", rules(SourceRule{Prefix: "10.0.0.1/8", Rate: 1, Burst: 1}), "sources.rules[0].prefix", "10.0.0.0/8"},
		{"short mapped prefix", rules(SourceRule{Prefix: "::ffff:0.0.0.0/95", Rate: 1, Burst: 1}), "sources.rules[0].prefix", "host bits"},
		{"zone", rules(SourceRule{Prefix: "fe80::1%eth0", Rate: 1, Burst: 1}), "sources.rules[0].prefix", "zones"},
		{"duplicate", rules(
			SourceRule{Prefix: "10.0.0.0/8", Rate: 1, Burst: 1},
			SourceRule{Prefix: "10.0.0.0/8", Rate: 2, Burst: 1},
		), "sources.rules[1].prefix", "sources.rules[0]"},
		{"address equals /32", rules(
			SourceRule{Prefix: "192.0.2.7", Rate: 1, Burst: 1},
			SourceRule{Prefix: "192.0.2.7/32", Rate: 2, Burst: 1},
		), "sources.rules[1].prefix", "same prefix"},
		{"rule burst zero", rules(SourceRule{Prefix: "10.0.0.0/8", Rate: 1}), "sources.rules[0].burst", "0"},
		{"rule rate NaN", rules(SourceRule{Prefix: "10.0.0.0/8", Rate: math.NaN(), Burst: 1}), "sources.rules[0].rate", "NaN"},
		{"rule rate too small", rules(SourceRule{Prefix: "10.0.0.0/8", Rate: 1e-6, Burst: 1}), "sources.rules[0].rate", "1e-06"},
		{"rule rate too large", rules(SourceRule{Prefix: "10.0.0.0/8", Rate: 2e9, Burst: 1}), "sources.rules[0].rate", "2e+09"},
		{"rule burst too large", rules(SourceRule{Prefix: "10.0.0.0/8", Rate: 1, Burst: 2_000_000}), "sources.rules[0].burst", "2000000"},
		{"deny ignores burst", rules(SourceRule{Prefix: "10.0.0.0/8", Rate: 0, Burst: -3}), "", ""},
		{"default ok", withDefault(SourceLimit{Rate: 10, Burst: 5}, 100), "", ""},
		{"default burst", withDefault(SourceLimit{Rate: 10}, 100), "sources.default.burst", "0"},
		{"default rate", withDefault(SourceLimit{Rate: -2, Burst: 1}, 100), "sources.default.rate", "-2"},
		{"default needs table", withDefault(SourceLimit{Rate: 10, Burst: 5}, 0), "sources.max_tracked", "0"},
		{"deny default needs no table", withDefault(SourceLimit{Rate: 0}, 0), "", ""},
		{"max tracked too large", withDefault(SourceLimit{Rate: 10, Burst: 5}, MaxMaxTracked+1), "sources.max_tracked", "16777217"},
		{"max tracked negative", Config{Rate: 1, Burst: 1, Sources: SourceConfig{MaxTracked: -1}}, "sources.max_tracked", "-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ce *sluice.FieldError
			if !errors.As(err, &ce) {
				t.Fatalf("Validate() = %v, want a *sluice.FieldError for %s", err, tt.field)
			}
			if ce.Path != tt.field {
				t.Errorf("field = %q, want %q (error %v)", ce.Path, tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.frag) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %q and %q", err, tt.field, tt.frag)
			}
			if _, nerr := New(tt.cfg, t0); nerr == nil {
				t.Errorf("New accepted a config Validate rejects")
			}
		})
	}
}
