// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{Addrs: []string{"127.0.0.1:6379"}}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Prefix != "sluice" || c.Period != time.Second || c.Timeout != 250*time.Millisecond ||
		c.HeartbeatTTL != 3*time.Second || c.InitialInstances != 1 || !validName(c.Instance) {
		t.Fatalf("defaults %+v", c)
	}
	if c.Key() != "{sluice}:instances" {
		t.Fatalf("key %q", c.Key())
	}
}

// Every bad field is refused with its name and value.
func TestConfigValidateNamesTheField(t *testing.T) {
	for _, c := range []struct {
		field string
		edit  func(*Config)
	}{
		{"addrs", func(c *Config) { c.Addrs = nil }},
		{"addrs[0]", func(c *Config) { c.Addrs = []string{"redis"} }},
		{"addrs[0]", func(c *Config) { c.Addrs = []string{":6379"} }},
		{"addrs[0]", func(c *Config) { c.Addrs = []string{"h:99999"} }},
		{"addrs[1]", func(c *Config) { c.Addrs = []string{"h:1", "h:1"} }},
		{"db", func(c *Config) { c.DB = -1 }},
		{"db", func(c *Config) { c.Addrs, c.DB = []string{"h:1", "h:2"}, 2 }},
		{"instance", func(c *Config) { c.Instance = "has space" }},
		{"instance", func(c *Config) { c.Instance = strings.Repeat("x", 129) }},
		{"prefix", func(c *Config) { c.Prefix = "{x}" }},
		{"period", func(c *Config) { c.Period = time.Millisecond }},
		{"period", func(c *Config) { c.Period = 2 * time.Minute }},
		{"timeout", func(c *Config) { c.Timeout = -time.Second }},
		{"timeout", func(c *Config) { c.Timeout = c.Period }},
		{"heartbeat_ttl", func(c *Config) { c.HeartbeatTTL = c.Period }},
		{"heartbeat_ttl", func(c *Config) { c.HeartbeatTTL = 2 * time.Hour }},
		{"initial_instances", func(c *Config) { c.InitialInstances = -1 }},
		{"initial_instances", func(c *Config) { c.InitialInstances = 5000 }},
		{"local_stages[1]", func(c *Config) { c.LocalStages = []string{"a", "a"} }},
	} {
		cfg := Config{Addrs: []string{"127.0.0.1:6379"}}
		cfg.SetDefaults()
		c.edit(&cfg)
		err := cfg.Validate()
		var ce *sluice.FieldError
		if !errors.As(err, &ce) || ce.Path != c.field {
			t.Errorf("%s: got %v", c.field, err)
		}
	}
}
