// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// exchangeScript publishes one instance's report as its heartbeat and
// returns every live heartbeat, atomically, in one round trip and on one
// key (so a Redis Cluster runs it on the key's node). Time is the Redis
// server's, so the instances' clocks need not agree.
//
// KEYS[1] is the cluster's hash: field = instance id, value = "EXPIRY
// REPORT" with EXPIRY in Unix milliseconds. ARGV: instance id, report
// JSON, heartbeat TTL in milliseconds. It drops the fields whose expiry
// has passed, keeps the hash itself until the last heartbeat in it
// expires, and returns {now, expiry₁, report₁, expiry₂, report₂, …}.
const exchangeScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', now + ttl) .. ' ' .. ARGV[2])
local all = redis.call('HGETALL', KEYS[1])
local out = {string.format('%.0f', now)}
local last = now + ttl
for i = 1, #all, 2 do
  local v = all[i + 1]
  local sp = string.find(v, ' ', 1, true)
  local exp = sp and tonumber(string.sub(v, 1, sp - 1))
  if exp == nil or exp <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = string.sub(v, 1, sp - 1)
    out[#out + 1] = string.sub(v, sp + 1)
    if exp > last then last = exp end
  end
end
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', last))
return out
`

// quietRedis drops go-redis's own log lines (a refused dial every sync
// while Redis is down): the runner reports failures itself, once per
// change of mode, through the proxy's logger.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

// Store is the Redis side of cluster mode: one exchange per sync, and
// leaving on shutdown. It is safe for concurrent use.
type Store struct {
	opts   *redis.UniversalOptions
	mu     sync.Mutex // guards client (replaced after a failure)
	client redis.UniversalClient
	key    string
	ttl    time.Duration
	script *redis.Script
}

// NewStore returns a store for a validated cfg, with a go-redis client:
// a single server for one address, a Redis Cluster for several, Sentinel
// with cfg.MasterName. It reads the username, password and TLS files
// (see Config.credentials and TLSConfig), but does not connect
// yet (the first exchange does). Network operations are bounded by
// cfg.Timeout and not retried within an exchange: the next sync is the
// retry; one immediate retry covers a connection that died since the
// last sync. After a failed exchange the client is replaced by a fresh
// one, so that no connection or dial back-off of the outage delays the
// first sync after Redis returns. The first call silences go-redis's process-wide logger (its
// lines would repeat every sync while Redis is down; the runner logs
// each change of mode instead).
func NewStore(cfg Config) (*Store, error) {
	quietOnce.Do(func() { redis.SetLogger(quietRedis{}) })
	user, pass, err := cfg.credentials()
	if err != nil {
		return nil, err
	}
	opts := &redis.UniversalOptions{
		Addrs:                 cfg.Addrs,
		MasterName:            cfg.MasterName,
		DB:                    cfg.DB,
		Username:              user.Reveal(),
		Password:              pass.Reveal(),
		ClientName:            "sluice-" + cfg.Instance,
		DialTimeout:           cfg.Timeout,
		ReadTimeout:           cfg.Timeout,
		WriteTimeout:          cfg.Timeout,
		PoolTimeout:           cfg.Timeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		MinRetryBackoff:       -1,
		DialerRetries:         1,
		PoolSize:              4,
		DisableIdentity:       true,
	}
	if cfg.TLS != nil {
		if opts.TLSConfig, err = cfg.TLS.config(); err != nil {
			return nil, err
		}
	}
	return &Store{opts: opts, client: redis.NewUniversalClient(opts), key: cfg.Key(), ttl: cfg.HeartbeatTTL, script: redis.NewScript(exchangeScript)}, nil
}

// Exchange publishes rep as this instance's heartbeat and returns every
// live instance's report with its expiry, and the Redis server's time.
// A peer whose report does not decode (another version) is left out.
func (s *Store) Exchange(ctx context.Context, rep Report) (Exchange, error) {
	body, err := json.Marshal(rep)
	if err != nil {
		return Exchange{}, fmt.Errorf("cluster: encoding the report: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.script.Run(ctx, s.client, []string{s.key}, rep.Instance, body, s.ttl.Milliseconds()).StringSlice()
	if err != nil {
		_ = s.client.Close()
		s.client = redis.NewUniversalClient(s.opts)
		return Exchange{}, fmt.Errorf("redis: %w", err)
	}
	if len(res) == 0 || len(res)%2 != 1 {
		return Exchange{}, fmt.Errorf("redis: exchange returned %d values", len(res))
	}
	now, err := strconv.ParseInt(res[0], 10, 64)
	if err != nil {
		return Exchange{}, fmt.Errorf("redis: exchange returned the time %q", res[0])
	}
	x := Exchange{ServerTime: time.UnixMilli(now)}
	for i := 1; i+1 < len(res); i += 2 {
		exp, err := strconv.ParseInt(res[i], 10, 64)
		if err != nil {
			continue
		}
		var p Peer
		if err := json.Unmarshal([]byte(res[i+1]), &p.Report); err != nil || p.Report.Instance == "" {
			continue
		}
		p.Expires = time.UnixMilli(exp)
		x.Peers = append(x.Peers, p)
	}
	return x, nil
}

// Leave publishes rep (its mode ModeLeft) as this instance's last
// heartbeat: the others stop counting it at their next sync instead of
// when its heartbeat would have expired. Only a shutdown calls it; a
// crashed instance simply expires.
func (s *Store) Leave(ctx context.Context, rep Report) error {
	rep.Mode = ModeLeft
	_, err := s.Exchange(ctx, rep)
	return err
}

// Close closes the connections.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client.Close()
}
