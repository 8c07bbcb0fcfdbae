// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/control"
)

// Config is the admission policy shared by the proxy and the middleware:
// request classes, stages with their controllers, the rejection response,
// shadow mode and the degradation header. It is the part of the proxy's
// YAML file below the top level (the proxy adds listeners, admin and
// backends). The zero value of every field means its documented default
// (SetDefaults fills them); decode it with unknown keys as errors
// (yaml.Decoder.KnownFields(true)) and call Validate.
//
// Changing shadow or classes.order changes every stage, so a reload with
// such a change starts every controller afresh.
type Config struct {
	// Classes defines request classes and how requests are classified.
	Classes ClassesConfig `yaml:"classes"`
	// Stages are matched in order; the first match decides. A request that
	// matches no stage goes to an implicit stage "default", which runs no
	// admission control (none) — unless there are no stages at all: then
	// every request goes to it and it runs auto at its defaults, the same
	// default as a stage without a controller and the proxy's quick start.
	Stages []StageConfig `yaml:"stages"`
	// Reject is the explicit rejection response.
	Reject RejectConfig `yaml:"reject"`
	// Shadow decides and records everything but admits every request
	// (safe rollout): would-be rejections are counted as shadow_rejected.
	// Default false.
	Shadow bool `yaml:"shadow"`
	// Degrade configures how a degrading stage tells the backend its
	// quality level.
	Degrade DegradeConfig `yaml:"degrade"`
	// Hops names the headers that carry a request's priority, tenant and
	// remaining time from one hop to the next, and bounds the time
	// (docs/hops.md).
	Hops HopsConfig `yaml:"hops"`
}

// HopsConfig is how a request's priority, tenant and deadline travel
// from hop to hop. The priority (a class name of classes.order, or a
// criticality: CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE) and
// the tenant are believed only from classes.trusted_proxies; a believed
// priority gives the request's class before classes.rules are tried. The
// timeout, in grpc-timeout's encoding ("250m" is 250 ms), is read from
// any peer, clamped to [MinTimeout, MaxTimeout], and is the request's
// deadline at this hop. A malformed value is treated as absent and
// counted (sluice_hop_invalid_total), an untrusted priority or tenant is
// ignored and counted (sluice_hop_untrusted_total).
type HopsConfig struct {
	// PriorityHeader carries the priority (default X-Sluice-Priority).
	PriorityHeader string `yaml:"priority_header"`
	// TenantHeader carries the tenant (default X-Sluice-Tenant).
	TenantHeader string `yaml:"tenant_header"`
	// TimeoutHeader carries the time left (default X-Sluice-Timeout).
	TimeoutHeader string `yaml:"timeout_header"`
	// MinTimeout is the least time a timeout header may give (default 0:
	// a negative or zero timeout is a deadline already passed, and the
	// request is rejected as such).
	MinTimeout time.Duration `yaml:"min_timeout"`
	// MaxTimeout is the most time a timeout header may give (default 5m).
	MaxTimeout time.Duration `yaml:"max_timeout"`
}

// ClassesConfig defines request classes in priority order and the rules
// that assign them.
type ClassesConfig struct {
	// Order lists the class names, highest priority first (letters,
	// digits, '_', '.', '-'). Default ["default"]. The last class is the
	// one unmatched requests get unless Default says otherwise.
	Order []string `yaml:"order"`
	// Default is the class of requests no rule matches (default: the last
	// class of Order).
	Default string `yaml:"default"`
	// Rules are tried in order; the first match gives the class.
	Rules []ClassRule `yaml:"rules"`
	// TrustedProxies are the CIDRs (or single addresses) of peers whose
	// X-Forwarded-For and class headers are believed. X-Forwarded-For is
	// read right to left, skipping trusted addresses; the first untrusted
	// one is the client. A malformed entry stops the walk at the last
	// trusted address reached. A request from an untrusted peer carrying a
	// class header (or a cookie of a rule with trust: trusted) is
	// classified as if it had none. Trusted proxies must strip or
	// overwrite class headers sent by their own clients. Default: none.
	TrustedProxies []string `yaml:"trusted_proxies"`
}

// ClassRule assigns Class to requests that match every given condition;
// a rule needs at least one.
type ClassRule struct {
	// Class is a name of ClassesConfig.Order.
	Class string `yaml:"class"`
	// Header matches a request header (believed only from trusted peers,
	// unless the rule says trust: any).
	Header *HeaderMatch `yaml:"header"`
	// Cookie matches a cookie value (same trust rule as Header).
	Cookie *HeaderMatch `yaml:"cookie"`
	// CIDRs match the client address (after trusted X-Forwarded-For);
	// single addresses are allowed.
	CIDRs []string `yaml:"cidrs"`
	// ClientCert matches the identity of the request's verified TLS
	// client certificate (its first URI SAN, else first DNS SAN, else
	// subject CN; classify.CertIdentity). The proxy needs a listener
	// that verifies client certificates (tls.client_auth).
	ClientCert *CertMatch `yaml:"client_cert"`
}

// CertMatch matches the identity of a verified client certificate.
type CertMatch struct {
	// Value is the exact identity, such as
	// spiffe://example.org/ns/shop/sa/api; empty matches any verified
	// certificate.
	Value string `yaml:"value"`
}

// HeaderMatch matches a header or cookie by name and (optionally) value.
type HeaderMatch struct {
	// Name is the header name (any case) or the cookie name (exact).
	Name string `yaml:"name"`
	// Value is the exact value; empty matches any non-empty value.
	Value string `yaml:"value"`
	// Trust is "trusted" (default: only from trusted proxies) or "any".
	Trust string `yaml:"trust"`
}

// StageConfig is one stage: which requests it takes and its controller.
type StageConfig struct {
	// Name is unique (letters, digits, '_', '.', '-'; "default" is
	// reserved for the implicit stage); it labels metrics and the admin
	// API.
	Name string `yaml:"name"`
	// Match selects the stage's requests.
	Match MatchConfig `yaml:"match"`
	// Controller is a registry name: auto, seda, yaksha, kihl, voigt-cpu,
	// voigt-queue, gradient2, envoy-gradient, bbr, static-rate,
	// static-concurrency, none (default auto, with the parameters Params
	// leaves out at auto's defaults; the implicit stage of requests that
	// match no stage is none).
	Controller string `yaml:"controller"`
	// Params are the controller's parameters (the fields of its
	// control.XConfig, by YAML name); unknown keys are errors.
	Params yaml.Node `yaml:"params"`
	// Control is the controller's configuration as a Go value, in place
	// of Controller and Params: a pointer to one of the registered
	// control.XConfig types, such as &auto.Config{...} (its
	// registry name, ControllerName, is then the stage's Controller).
	// A field left at zero means its default (control.WithDefaults), so
	// a literal sets only what differs from the controller's defaults,
	// as params do. It is validated as params are, and its
	// errors name the same paths ("stages[0].params.slo"). The
	// configuration is copied when the policy is built. When it is nil,
	// Controller and Params are resolved instead. A configuration file
	// cannot set it; written as YAML, it becomes controller and params.
	Control control.Config `yaml:"-"`
	// ClassTargets gives per-class p90 targets for a seda controller, by
	// class name; classes not listed use params.target. It needs
	// Differentiate when there is more than one class.
	ClassTargets map[string]time.Duration `yaml:"class_targets"`
	// Differentiate runs one SEDA controller and token bucket per class
	// (Welsh & Culler §3.3), with the class order as priority. Default
	// true (it matters only for seda with more than one class); false
	// shares one controller among all classes, which degradation
	// (params.degrade.enabled) requires.
	Differentiate *bool `yaml:"differentiate"`
	// Burst is the token-bucket size (default 5).
	Burst int `yaml:"burst"`
	// Window is the number of response-time samples kept per period
	// (default 4096).
	Window int `yaml:"window"`
	// Queue sizes the wait queue of a stage whose controller limits
	// concurrency (auto, static-concurrency; the peers' gradient2,
	// envoy-gradient and bbr reject at once); other stages ignore it.
	// auto shortens the wait to what its SLO allows.
	Queue QueueConfig `yaml:"queue"`
	// LongLived is the response duration beyond which a response is a
	// stream: it leaves the response-time window and releases any
	// concurrency slot (default 30s). WebSocket upgrades and
	// text/event-stream responses are streams from the start.
	LongLived time.Duration `yaml:"long_lived"`
	// RateLimitHeaders sends the IETF RateLimit-Policy and RateLimit
	// fields (draft-ietf-httpapi-ratelimit-headers-10) on the stage's
	// answers, admitted and rejected (default false; static-rate only).
	RateLimitHeaders bool `yaml:"ratelimit_headers"`
	// Priority is how a stage with several classes sheds its lowest
	// classes first (docs/hops.md).
	Priority PriorityConfig `yaml:"priority"`
	// Tenants turns on weighted fair queueing among tenants inside the
	// stage's wait queue (stages with a concurrency limit; see
	// stage.Tenants). The tenant is what TenantsConfig.Key names: by
	// default the request's hop tenant (the hops.tenant_header, believed
	// only from trusted proxies).
	Tenants TenantsConfig `yaml:"tenants"`
	// Hog cancels requests in service that hold their slot too long
	// (stage.Hog): the handler's context ends, the proxy cancels the
	// upstream exchange, and the request is answered 503 with
	// Retry-After. Off by default.
	Hog HogConfig `yaml:"hog"`
}

// HogConfig is a stage's hog rule (stage.Hog).
type HogConfig struct {
	// MaxServiceTime cancels a request still in service this long after
	// it got its slot (0, the default: no limit).
	MaxServiceTime time.Duration `yaml:"max_service_time"`
	// OverShare cancels, at each control step while others wait, the
	// longest-running request of the tenant furthest over its fair share
	// of the limit (Atropos's policy); it needs tenants.fair (default
	// false).
	OverShare bool `yaml:"over_share"`
	// MinServiceTime is the least time in service of a request
	// over_share cancels (default: the controller's target, auto's SLO;
	// required for a controller without one).
	MinServiceTime time.Duration `yaml:"min_service_time"`
}

// TenantsConfig is a stage's fair queueing among tenants.
type TenantsConfig struct {
	// Fair serves each class's waiters in weighted fair order among
	// tenants instead of FIFO (default false).
	Fair bool `yaml:"fair"`
	// Weights gives tenants, by name, a weight other than DefaultWeight;
	// each > 0.
	Weights map[string]float64 `yaml:"weights"`
	// DefaultWeight is the weight of every other tenant and of requests
	// without one (default 1).
	DefaultWeight float64 `yaml:"default_weight"`
	// Key says what names a request's tenant (default hop): "hop", the
	// hop tenant header (hops.tenant_header); "client", the client
	// address the classifier reads (the peer, or the first untrusted
	// X-Forwarded-For entry from a trusted proxy), cut to IPv4Prefix or
	// IPv6Prefix bits; "header:<Name>", the value of request header Name,
	// believed only from classes.trusted_proxies; "client-cert", the
	// identity of the request's verified TLS client certificate
	// (ClassRule.ClientCert's), none without one; "path", the request's
	// URL path (a gRPC call's is its full method name,
	// "/pkg.Service/Method"), its first 128 bytes: one tenant per API,
	// so that two APIs sharing a backend share it fairly.
	Key string `yaml:"key"`
	// Cost is what a request costs its tenant (default requests):
	// "requests", one per request; "service_time", its measured service
	// time (from its slot to its end), estimated per tenant; "reported",
	// the cost its handler reports (sluice.ReportCost; the middleware and
	// grpcsluice only), else its service time. See stage.CostMeasure.
	Cost string `yaml:"cost"`
	// SlotShare bounds the slots each tenant holds by its max-min fair
	// share of the concurrency limit over the tenants' peak demands in
	// the last control period (default false): a tenant whose requests
	// hold their slots long (a costly API, or one waiting on a slow
	// service behind this one) cannot take the slots another tenant's
	// bursts need. See stage.Tenants.SlotShare.
	SlotShare bool `yaml:"slot_share"`
	// DeadlineBudget, when > 0, starts a request only while what is
	// left of its deadline exceeds DeadlineBudget × its tenant's
	// estimated service time at the stage; otherwise it is refused
	// (outcome deadline) before it takes a slot (default 0: off). Needs
	// cost service_time. See stage.Tenants.DeadlineBudget.
	DeadlineBudget float64 `yaml:"deadline_budget"`
	// IPv4Prefix and IPv6Prefix are the prefix lengths of the client
	// address that name its tenant under key client (default 32 and
	// 128: one tenant per address; 24 and 64 put a subnet in one).
	IPv4Prefix int `yaml:"ipv4_prefix"`
	IPv6Prefix int `yaml:"ipv6_prefix"`
}

// The keys of a tenant (TenantsConfig.Key).
const (
	TenantKeyHop    = "hop"
	TenantKeyClient = "client"
	// TenantKeyClientCert names the tenant by the verified client
	// certificate's identity (classify.ClientCertIdentity).
	TenantKeyClientCert = "client-cert"
	// TenantKeyHeader is the prefix of "header:<Name>".
	TenantKeyHeader = "header:"
	// TenantKeyPath names the tenant by the request's URL path (a gRPC
	// call's full method name).
	TenantKeyPath = "path"
)

// PriorityConfig is how a stage sheds its lowest classes first (see
// stage.Priority for the mechanism of each kind of gate).
type PriorityConfig struct {
	// Shed turns it on or off (default: the controller's): true, except
	// under seda, yaksha, kihl, voigt-cpu and voigt-queue, whose papers
	// define their own classes or none (their law stays as written unless
	// shed is true; seda with one controller per class keeps the paper's
	// class law).
	Shed *bool `yaml:"shed"`
	// Reserve, in (0, 1), is the share of a concurrency limit by which the
	// highest class may exceed it while the limit rejects at once (the
	// lower classes less, the lowest none), and, for a token bucket, how
	// far ahead of it in seconds the highest class may run (default 0.3).
	Reserve float64 `yaml:"reserve"`
}

// MatchConfig selects requests; every given condition must hold, and an
// empty match takes every request.
type MatchConfig struct {
	// PathPrefix matches paths starting with it (it must start with '/';
	// "/api" also matches "/apis", write "/api/" for a directory).
	PathPrefix string `yaml:"path_prefix"`
	// PathRegex is a Go regular expression matched against the path
	// (unanchored unless it anchors itself with ^ and $).
	PathRegex string `yaml:"path_regex"`
	// Methods are compared case-sensitively (GET, POST, …); empty: any.
	Methods []string `yaml:"methods"`
	// Host is compared case-insensitively with the request's host without
	// its port; write it without port.
	Host string `yaml:"host"`
	// GRPCService matches the calls of a gRPC service, by its full name
	// ("pkg.Service": the paths "/pkg.Service/…"); GRPCMethod one method,
	// by its full name ("/pkg.Service/Method", the path of its calls).
	// Each excludes path_prefix and path_regex. The proxy and the gRPC
	// interceptors (package grpcsluice) match them alike.
	GRPCService string `yaml:"grpc_service"`
	GRPCMethod  string `yaml:"grpc_method"`
}

// QueueConfig sizes a wait queue.
type QueueConfig struct {
	// Max is the number of requests allowed to wait (default 1024).
	Max int `yaml:"max"`
	// Timeout is the longest wait before rejection (default 1s).
	Timeout time.Duration `yaml:"timeout"`
}

// RejectConfig is the explicit, cheap rejection answer.
type RejectConfig struct {
	// Status is the HTTP status, within 400–599 (default 503).
	Status int `yaml:"status"`
	// RetryAfter is the least Retry-After value (default 1s; sent in
	// whole seconds, rounded up; must be > 0). Retry-After is computed
	// from the rejecting stage's state (stage.Stage.RetryAfter: the time
	// to the class's next token, the drain time of the queue ahead, or
	// the controller's next adjustment) and bounded to
	// [RetryAfter, RetryAfterMax].
	RetryAfter time.Duration `yaml:"retry_after"`
	// RetryAfterMax is the greatest computed Retry-After value (default
	// 30s, or retry_after when that is larger); equal to RetryAfter, the
	// value is fixed.
	RetryAfterMax time.Duration `yaml:"retry_after_max"`
	// RetryJitter adds a uniformly random 0..jitter to Retry-After so that
	// rejected clients do not retry in step (default 0).
	RetryJitter time.Duration `yaml:"retry_jitter"`
	// Body is a Go template for the text or HTML body (html/template when
	// ContentType is text/html); .Stage, .Class and .RetryAfter (seconds)
	// are available. Default: a one-line text message. Bodies are
	// rendered once per stage, class and Retry-After value.
	Body string `yaml:"body"`
	// ContentType of Body (default text/plain; charset=utf-8). Clients
	// that accept application/json get a JSON body instead.
	ContentType string `yaml:"content_type"`
}

// DegradeConfig configures the quality header.
type DegradeConfig struct {
	// Header carries a degrading stage's quality level in (0, 1] to the
	// backend (default X-Sluice-Quality).
	Header string `yaml:"header"`
}
