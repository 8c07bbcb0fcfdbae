// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/secret"
)

// Defaults and bounds of a Config.
const (
	// DefaultPrefix is the default key prefix: the instances of one
	// cluster share the Redis hash "{sluice}:instances".
	DefaultPrefix = "sluice"
	// DefaultPeriod is the default sync period.
	DefaultPeriod = time.Second
	// MinPeriod and MaxPeriod bound Config.Period.
	MinPeriod, MaxPeriod = 100 * time.Millisecond, time.Minute
	// DefaultTTLPeriods is the default heartbeat TTL in sync periods: an
	// instance that missed two syncs in a row is still counted, one that
	// missed three is not.
	DefaultTTLPeriods = 3
	// MinTTLPeriods is the shortest heartbeat TTL in sync periods: a live
	// instance must refresh its heartbeat at least once within the TTL
	// even when one sync is late.
	MinTTLPeriods = 2
	// MaxTTL bounds Config.HeartbeatTTL.
	MaxTTL = time.Hour
	// MaxInitialInstances bounds Config.InitialInstances.
	MaxInitialInstances = 1000
	// maxName bounds an instance id and a prefix.
	maxName = 128
)

// Config is the cluster section of the proxy's configuration: where the
// shared state lives (Redis) and how this instance takes part. Start
// from the zero value, decode YAML into it (unknown fields are errors),
// call SetDefaults, then Validate.
//
// Example:
//
//	cluster:
//	  addrs: [10.0.0.9:6379]
//	  instance: edge-1
//	  period: 1s
type Config struct {
	// Addrs are the Redis addresses, host:port (at least one). One
	// address is a single Redis server; several are the seed nodes of a
	// Redis Cluster; with MasterName they are Sentinel addresses.
	Addrs []string `yaml:"addrs" json:"addrs"`
	// MasterName, when set, is the name of the master that the Sentinels
	// at Addrs monitor (Redis Sentinel failover). Default: none.
	MasterName string `yaml:"master_name,omitempty" json:"master_name,omitempty"`
	// Username is the Redis ACL user (default: none, the default user),
	// or UsernameFile a file whose first line is it.
	Username     secret.String `yaml:"username,omitempty" json:"username,omitempty"`
	UsernameFile string        `yaml:"username_file,omitempty" json:"username_file,omitempty"`
	// Password is the password of the user (default: none), or
	// PasswordFile a file whose first line is it: a mounted Kubernetes
	// Secret keeps it out of the configuration file. Either is shown
	// redacted in GET /config and never logged. A file is read (with
	// package secret's rules: the first line, trimmed; an empty file is
	// an error) at start and on every reload, so a rotated password
	// applies on the next reload.
	Password     secret.String `yaml:"password,omitempty" json:"password,omitempty"`
	PasswordFile string        `yaml:"password_file,omitempty" json:"password_file,omitempty"`
	// TLS, when set, speaks TLS to Redis (every node and Sentinel) with
	// these settings (TLSConfig). Default none: plaintext.
	TLS *TLSConfig `yaml:"tls,omitempty" json:"tls,omitempty"`
	// DB is the Redis database number of a single server or a Sentinel
	// master (default 0; a Redis Cluster has only 0).
	DB int `yaml:"db,omitempty" json:"db,omitempty"`
	// Instance identifies this instance in the cluster: 1 to 128
	// letters, digits, '_', '-', '.' or ':'. Every instance needs its own.
	// Default: the host name and the process id, "host-1234".
	Instance string `yaml:"instance" json:"instance"`
	// Prefix is the key prefix (default "sluice"): the cluster's state is
	// the Redis hash "{Prefix}:instances". Instances with the same prefix
	// on the same Redis form one cluster; 1 to 128 of the characters of
	// Instance.
	Prefix string `yaml:"prefix" json:"prefix"`
	// Period is the sync period (default 1s, in [100ms, 1m]): every
	// period the instance publishes its demand and heartbeat and takes
	// its part of every budget. No request ever waits for Redis.
	Period time.Duration `yaml:"period" json:"period"`
	// Timeout bounds one sync's Redis exchange (default a quarter of
	// Period, in (0, Period)). An exchange that fails or takes longer
	// puts the instance in fallback.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// HeartbeatTTL is how long an instance counts after its last
	// heartbeat (default 3 periods, at least 2 periods, at most 1h). An
	// instance that dies stops counting when its heartbeat expires, and
	// the others take over its part.
	HeartbeatTTL time.Duration `yaml:"heartbeat_ttl" json:"heartbeat_ttl"`
	// InitialInstances is the number of instances this one assumes
	// before its first sync, and the least it counts during the first
	// heartbeat TTL after it (default 1, at most 1000). Set it to the
	// usual size of the cluster so that an instance that starts while
	// Redis is unreachable, or before the others have published, takes
	// 1/InitialInstances of every budget rather than all of it.
	InitialInstances int `yaml:"initial_instances" json:"initial_instances"`
	// LocalStages names static-rate and static-concurrency stages whose
	// budget stays per instance (default: none; every such stage's
	// budget is global and split among the instances).
	LocalStages []string `yaml:"local_stages,omitempty" json:"local_stages,omitempty"`
}

func badField(field string, v any, want string) error { return fielderr.Invalid(field, v, want) }

// DefaultInstance returns the default instance id: the host name and the
// process id ("host-1234"), or "sluice-1234" when the host name is not
// a valid id.
func DefaultInstance() string {
	h, err := os.Hostname()
	if err != nil || !validName(h) || len(h) > maxName-12 {
		h = "sluice"
	}
	return h + "-" + strconv.Itoa(os.Getpid())
}

// SetDefaults fills every unset optional field with its default.
func (c *Config) SetDefaults() {
	if c.Instance == "" {
		c.Instance = DefaultInstance()
	}
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	c.Period = cmp.Or(c.Period, DefaultPeriod)
	if c.Timeout == 0 {
		c.Timeout = c.Period / 4
	}
	if c.HeartbeatTTL == 0 {
		c.HeartbeatTTL = DefaultTTLPeriods * c.Period
	}
	c.InitialInstances = cmp.Or(c.InitialInstances, 1)
	if c.TLS != nil && c.TLS.MinVersion == "" {
		c.TLS.MinVersion = DefaultTLSMinVersion
	}
}

// Validate reports the first invalid field. It does not read the
// username, password and TLS files (NewStore does); call SetDefaults
// first.
func (c *Config) Validate() error {
	if len(c.Addrs) == 0 {
		return badField("addrs", "[]", "at least one Redis address host:port is required")
	}
	seen := map[string]int{}
	for i, a := range c.Addrs {
		f := fmt.Sprintf("addrs[%d]", i)
		if err := checkHostPort(a); err != nil {
			return badField(f, fmt.Sprintf("%q", a), err.Error())
		}
		if j, dup := seen[a]; dup {
			return badField(f, fmt.Sprintf("%q", a), fmt.Sprintf("the same address as addrs[%d]", j))
		}
		seen[a] = i
	}
	if c.DB < 0 {
		return badField("db", c.DB, "must be ≥ 0")
	}
	if c.DB != 0 && len(c.Addrs) > 1 && c.MasterName == "" {
		return badField("db", c.DB, "a Redis Cluster (several addrs without master_name) has only database 0")
	}
	if !validName(c.Instance) {
		return badField("instance", fmt.Sprintf("%q", c.Instance), "must be 1 to 128 letters, digits, '_', '-', '.' or ':'")
	}
	if !validName(c.Prefix) {
		return badField("prefix", fmt.Sprintf("%q", c.Prefix), "must be 1 to 128 letters, digits, '_', '-', '.' or ':'")
	}
	if c.Period < MinPeriod || c.Period > MaxPeriod {
		return badField("period", c.Period, fmt.Sprintf("must be in [%v, %v]", MinPeriod, MaxPeriod))
	}
	if c.Timeout <= 0 || c.Timeout >= c.Period {
		return badField("timeout", c.Timeout, fmt.Sprintf("must be > 0 and shorter than period (%v)", c.Period))
	}
	if c.HeartbeatTTL < MinTTLPeriods*c.Period || c.HeartbeatTTL > MaxTTL {
		return badField("heartbeat_ttl", c.HeartbeatTTL, fmt.Sprintf("must be at least %d periods (%v) and at most %v", MinTTLPeriods, MinTTLPeriods*c.Period, MaxTTL))
	}
	if c.InitialInstances < 1 || c.InitialInstances > MaxInitialInstances {
		return badField("initial_instances", c.InitialInstances, fmt.Sprintf("must be in [1, %d]", MaxInitialInstances))
	}
	if (c.Username != "" || c.UsernameFile != "") && c.Password == "" && c.PasswordFile == "" {
		return badField("password", "unset", "an ACL user (username) needs its password or password_file")
	}
	if c.TLS != nil {
		if err := c.TLS.validate(); err != nil {
			return fielderr.Under("tls", err)
		}
	}
	names := map[string]int{}
	for i, n := range c.LocalStages {
		if j, dup := names[n]; dup {
			return badField(fmt.Sprintf("local_stages[%d]", i), fmt.Sprintf("%q", n), fmt.Sprintf("already local_stages[%d]", j))
		}
		names[n] = i
	}
	return nil
}

// Key returns the Redis key of the cluster's shared state, with a hash
// tag so that a Redis Cluster keeps it in one slot.
func (c *Config) Key() string { return "{" + c.Prefix + "}:instances" }

func validName(s string) bool {
	if s == "" || len(s) > maxName {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
			ch == '_' || ch == '-' || ch == '.' || ch == ':' {
			continue
		}
		return false
	}
	return true
}

func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("a host is required (host:port)")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("the port must be a number in [1, 65535]")
	}
	return nil
}
