// Package proxy is sluice's reverse proxy: a transparent HTTP proxy that
// an operator puts in front of an unmodified service (the Yaksha design)
// with per-stage and per-class admission control (the SEDA design).
//
// A request goes through: the smuggling guard (plaintext listeners), the
// policy's classification into a stage and class, the stage's admission
// gate (reject early with 503 and Retry-After, or admit), the backend
// pool (a bounded FIFO queue in front of servers with a per-server
// concurrency limit; its length is the papers' listen queue), and
// net/http/httputil.ReverseProxy. Its response time, from arrival at the
// proxy to the last byte of the response, feeds the stage's controller;
// long-lived responses (upgrades, event streams, responses beyond the
// stage's long_lived) release their slots early and are not samples.
//
// Config is the YAML file (docs/config.md documents every field); Server
// runs the listeners, the admin API (/metrics, /state, /config, /reload,
// /stages/{name}/target) and swaps configurations atomically on reload.
package proxy
