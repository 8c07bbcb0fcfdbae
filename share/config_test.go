// SPDX-License-Identifier: Apache-2.0

package share

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
)

func TestParseBandwidth(t *testing.T) {
	cases := []struct {
		in   string
		want float64
	}{
		{"100000", 100000},
		{"1e5", 100000},
		{"100KB", 100000},
		{"100kB", 100000},
		{"100 KB", 100000},
		{"100KB/s", 100000},
		{" 100 KB/s ", 100000},
		{"8MiB", 8 << 20},
		{"8MiB/s", 8 << 20},
		{"1KiB", 1024},
		{"1.5MB", 1.5e6},
		{"2GB", 2e9},
		{"1TiB", 1 << 40},
		{"512B", 512},
		{"512B/s", 512},
		{"0", 0},
		{"-0", 0},
	}
	for _, tc := range cases {
		got, err := ParseBandwidth(tc.in)
		if err != nil || float64(got) != tc.want || math.Signbit(float64(got)) {
			t.Errorf("ParseBandwidth(%q) = %v, %v; want %g", tc.in, float64(got), err, tc.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"", "missing number"},
		{"KB", "missing number"},
		{"-1KB", ">= 0"},
		{"100kb", "bits"},
		{"8Mb", "bits"},
		{"8Mbps", "bits"},
		{"10 kbit/s", "bits"},
		{"100XB", "unknown unit"},
		{"NaN", "missing number"},
		{"Inf", "missing number"},
		{"1e400", "finite"},
		{"0x10", "unexpected character"},
		{"1_000", "unexpected character"},
		{"1.2.3KB", "not a number"},
		{"100 KB/h", "unexpected character"},
	}
	for _, tc := range bad {
		_, err := ParseBandwidth(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "bandwidth") {
			t.Errorf("ParseBandwidth(%q) error = %v, want one mentioning %q", tc.in, err, tc.msg)
		}
	}
}

func FuzzParseBandwidth(f *testing.F) {
	for _, s := range []string{"100KB", "8MiB/s", "1e5", "100 kB/s", "0", "-1", "1e400", "NaN", "8Mb", "KiB", "1.5GiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBandwidth(s)
		if err != nil {
			return
		}
		v := float64(b)
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Fatalf("ParseBandwidth(%q) = %v: not finite and >= 0", s, v)
		}
		// The exact text form reads back to the same value.
		txt, _ := b.MarshalText()
		b2, err := ParseBandwidth(string(txt))
		if err != nil || b2 != b {
			t.Fatalf("round trip of %q via %q: %v, %v", s, txt, float64(b2), err)
		}
		// The human form reads back (rounded to 6 significant digits).
		b3, err := ParseBandwidth(b.String())
		if err != nil || math.Abs(float64(b3)-v) > 1e-5*v {
			t.Fatalf("String() of %q = %q reads back as %v, %v", s, b.String(), float64(b3), err)
		}
	})
}

func TestConfigYAML(t *testing.T) {
	src := `
total_bandwidth: 100KB/s
alpha: 0.1
period: 500ms
standby_limit: 4
max_delay: 5s
clients:
  - {name: a, share: 10, cidrs: [10.0.0.1, 10.1.0.0/16]}
  - {name: b, share: 20, header_values: [tenant-b]}
  - {name: c, share: 30, api_keys: [k-c]}
`
	cfg := DefaultConfig()
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.TotalBandwidth != 100000 || cfg.Alpha != 0.1 || cfg.Period != 500*time.Millisecond ||
		cfg.StandbyLimit != 4 || cfg.MaxDelay != 5*time.Second || cfg.CacheSize != DefaultCacheSize {
		t.Fatalf("decoded %+v", cfg)
	}
	if got := cfg.OthersShare(); math.Abs(got-40) > 1e-12 {
		t.Fatalf("OthersShare = %g, want 40", got)
	}
	for _, in := range []string{"total_bandwidth: 100000", "total_bandwidth: 8MiB"} {
		var c Config
		if err := yaml.Unmarshal([]byte(in), &c); err != nil || c.TotalBandwidth <= 0 {
			t.Errorf("%s: %v, %v", in, c.TotalBandwidth, err)
		}
	}
	var c Config
	err := yaml.Unmarshal([]byte("total_bandwidth: 100Mb"), &c)
	if err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad bandwidth in YAML: %v, want an error naming the line", err)
	}
	if err := yaml.Unmarshal([]byte("total_bandwidth: [1]"), &c); err == nil {
		t.Error("a sequence as bandwidth was accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.TotalBandwidth = 1000
		c.Clients = []ClientConfig{
			{Name: "a", Share: 40, CIDRs: []string{"10.0.0.0/8"}, HeaderValues: []string{"ha"}, APIKeys: []APIKey{"ka"}},
			{Name: "b", Share: 60},
		}
		return c
	}
	if err := (func() *Config { c := base(); return &c })().Validate(); err != nil {
		t.Fatalf("base config: %v", err)
	}
	cases := []struct {
		field string
		mod   func(*Config)
	}{
		{"total_bandwidth", func(c *Config) { c.TotalBandwidth = 0 }},
		{"total_bandwidth", func(c *Config) { c.TotalBandwidth = -5 }},
		{"total_bandwidth", func(c *Config) { c.TotalBandwidth = Bandwidth(math.NaN()) }},
		{"total_bandwidth", func(c *Config) { c.TotalBandwidth = Bandwidth(math.Inf(1)) }},
		{"initial_max_bandwidth", func(c *Config) { c.InitialMaxBandwidth = 999 }},
		{"initial_max_bandwidth", func(c *Config) { c.InitialMaxBandwidth = Bandwidth(math.NaN()) }},
		{"alpha", func(c *Config) { c.Alpha = 0.04 }},
		{"alpha", func(c *Config) { c.Alpha = 0.31 }},
		{"alpha", func(c *Config) { c.Alpha = math.NaN() }},
		{"period", func(c *Config) { c.Period = 499 * time.Millisecond }},
		{"period", func(c *Config) { c.Period = 2 * time.Second }},
		{"standby_limit", func(c *Config) { c.StandbyLimit = 0 }},
		{"standby_limit", func(c *Config) { c.StandbyLimit = MaxStandbyLimit + 1 }},
		{"max_delay", func(c *Config) { c.MaxDelay = 0 }},
		{"max_delay", func(c *Config) { c.MaxDelay = 2 * time.Hour }},
		{"cache_size", func(c *Config) { c.CacheSize = -1 }},
		{"cache_size", func(c *Config) { c.CacheSize = MaxCacheSize + 1 }},
		{"reply_buffer", func(c *Config) { c.ReplyBuffer = -1 }},
		{"client_header", func(c *Config) { c.ClientHeader = "" }},
		{"client_header", func(c *Config) { c.ClientHeader = "X Client" }},
		{"api_key_header", func(c *Config) { c.APIKeyHeader = "a:b" }},
		{"api_key_header", func(c *Config) { c.APIKeyHeader = "x-sluice-client" }},
		{"clients[0].name", func(c *Config) { c.Clients[0].Name = "" }},
		{"clients[0].name", func(c *Config) { c.Clients[0].Name = "-a" }},
		{"clients[0].name", func(c *Config) { c.Clients[0].Name = "a b" }},
		{"clients[0].name", func(c *Config) { c.Clients[0].Name = strings.Repeat("x", 65) }},
		{"clients[1].name", func(c *Config) { c.Clients[1].Name = "others" }},
		{"clients[1].name", func(c *Config) { c.Clients[1].Name = "a" }},
		{"clients[0].share", func(c *Config) { c.Clients[0].Share = 0 }},
		{"clients[0].share", func(c *Config) { c.Clients[0].Share = -1 }},
		{"clients[0].share", func(c *Config) { c.Clients[0].Share = 101 }},
		{"clients[0].share", func(c *Config) { c.Clients[0].Share = math.NaN() }},
		{"clients[1].share", func(c *Config) { c.Clients[1].Share = 60.5 }},
		{"clients[0].cidrs[0]", func(c *Config) { c.Clients[0].CIDRs = []string{"10.0.0.1/8"} }},
		{"clients[0].cidrs[0]", func(c *Config) { c.Clients[0].CIDRs = []string{"nonsense"} }},
		{"clients[0].cidrs[0]", func(c *Config) { c.Clients[0].CIDRs = []string{"fe80::1%eth0"} }},
		{"clients[0].cidrs[1]", func(c *Config) { c.Clients[0].CIDRs = []string{"10.0.0.0/8", "10.0.0.0/8"} }},
		{"clients[1].cidrs[0]", func(c *Config) { c.Clients[1].CIDRs = []string{"::ffff:10.0.0.0/104"} }},
		{"clients[0].header_values[0]", func(c *Config) { c.Clients[0].HeaderValues = []string{""} }},
		{"clients[1].header_values[0]", func(c *Config) { c.Clients[1].HeaderValues = []string{"ha"} }},
		{"clients[0].api_keys[0]", func(c *Config) { c.Clients[0].APIKeys = []APIKey{""} }},
		{"clients[1].api_keys[0]", func(c *Config) { c.Clients[1].APIKeys = []APIKey{"ka"} }},
	}
	for _, tc := range cases {
		c := base()
		tc.mod(&c)
		err := c.Validate()
		var ce *sluice.FieldError
		if !errors.As(err, &ce) || ce.Path != tc.field {
			t.Errorf("want an error on %s, got %v", tc.field, err)
			continue
		}
		if _, err := New(c); err == nil {
			t.Errorf("New accepted a config invalid on %s", tc.field)
		}
	}
	// Default config lacks only total_bandwidth.
	d := DefaultConfig()
	var ce *sluice.FieldError
	if err := d.Validate(); !errors.As(err, &ce) || ce.Path != "total_bandwidth" {
		t.Errorf("DefaultConfig().Validate() = %v, want total_bandwidth", err)
	}
	d.TotalBandwidth = 1
	if err := d.Validate(); err != nil {
		t.Errorf("DefaultConfig with total_bandwidth set: %v", err)
	}
	// A duplicated API key is never echoed.
	c := base()
	c.Clients[1].APIKeys = []APIKey{"ka"}
	if err := c.Validate(); err == nil || strings.Contains(err.Error(), "ka") {
		t.Errorf("duplicate key error %v must not show the key", err)
	}
	// Shares summing to 100 with rounding are accepted; others gets 0.
	c = base()
	c.Clients = []ClientConfig{{Name: "x", Share: 33.3}, {Name: "y", Share: 33.3}, {Name: "z", Share: 33.4}}
	if err := c.Validate(); err != nil || c.OthersShare() != 0 {
		t.Errorf("33.3+33.3+33.4: %v, others %g", err, c.OthersShare())
	}
}
