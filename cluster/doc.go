// SPDX-License-Identifier: Apache-2.0

// Package cluster makes several sluice instances (proxies, or services
// with the middleware) in front of one backend tier enforce one set of
// global limits: static-rate and static-concurrency budgets and Li &
// Jamin client shares hold for the cluster, not per instance, so N
// instances do not admit N times a global rate or give a tenant N times
// its share. The shared state lives in Redis (a single server, a Redis
// Cluster or Sentinel), as Envoy's global rate limit service, Traefik
// and go-zero keep theirs.
//
// # What is shared, and when
//
// Nothing on the request path: an instance syncs once per Config.Period.
// Each sync publishes its report — its demand per global budget (offered
// requests per second) and per client (requests per second, delivered
// bytes per second, measured bandwidth avg_i) — as its heartbeat, with an
// expiry of Config.HeartbeatTTL, and reads every live instance's report
// back, in one round trip (a Lua script over one Redis hash, timed by the
// Redis server's clock). From that view Core computes this instance's
// part of every budget: the part of a global rate or concurrency limit,
// and of every client's allocation b_i, in proportion to where the
// demand arrives (FloorFraction of each evenly). The stages and shares
// then enforce their part locally, with their unchanged lock-free or
// O(1) request path (stage.Stage.SetStatic, share.Shares.SetAllocations).
//
// # Adaptive controllers stay local
//
// seda, yaksha, kihl, voigt-*, auto and the peers' controllers measure
// the shared backend itself: its response times, utilization or queue
// already reflect the load of every instance. Each instance's controller
// therefore reacts to the cluster's overload and cuts its own admissions
// in proportion to its own traffic; dividing their settings by N as well
// would count the other instances twice. Only budgets written as fixed
// numbers for the whole service — static-rate, static-concurrency and
// client shares — are split.
//
// # Faults
//
// A sync that fails or takes longer than Config.Timeout puts the
// instance in fallback: every budget's part is 1/N of it, N the number
// of instances it counted last, until a sync succeeds. An instance that
// dies stops counting once its heartbeat expires; the others take over
// its part at their next sync. See Core for the exact rules.
//
// # Pieces
//
// Config (decode → SetDefaults → Validate), Core (the deterministic
// split, driven with now as an argument and tested in virtual time),
// Store (the Redis exchange, on go-redis), Runner (the ticker goroutine
// that reads the stages, syncs and applies the parts) and Metrics.
package cluster
