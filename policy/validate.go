// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/classify"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/hopnames"
	"github.com/sluicehq/sluice/internal/httpx"
	"github.com/sluicehq/sluice/internal/netprefix"
	"github.com/sluicehq/sluice/internal/strictyaml"
	"github.com/sluicehq/sluice/stage"
)

// Defaults of Config, filled by SetDefaults.
const (
	DefaultClass         = "default"
	DefaultController    = stage.DefaultController
	DefaultBurst         = stage.DefaultBurst
	DefaultWindow        = stage.DefaultWindow
	DefaultQueueMax      = stage.DefaultMaxQueue
	DefaultQueueTimeout  = stage.DefaultQueueTimeout
	DefaultLongLived     = 30 * time.Second
	DefaultRejectStatus  = 503
	DefaultRetryAfter    = time.Second
	DefaultRetryAfterMax = 30 * time.Second
	DefaultContentType   = "text/plain; charset=utf-8"
	DefaultRejectBody    = "503 overloaded: stage {{.Stage}} is shedding load; retry after {{.RetryAfter}} s\n"
	DefaultDegradeHeader = "X-Sluice-Quality"
	DefaultMaxTimeout    = 5 * time.Minute
	DefaultReserve       = stage.DefaultPriorityReserve
	// ImplicitStage is the name of the stage of requests that match no
	// configured stage (Config.ImplicitController says what it runs); the
	// name is reserved.
	ImplicitStage = "default"
	// ImplicitController is the controller of the implicit stage once the
	// configuration has stages: none, so that requests no stage matches
	// are admitted without control. A configured stage without a
	// controller, and the implicit stage of a configuration without
	// stages, run DefaultController.
	ImplicitController = "none"
	// TrustTrusted and TrustAny are the values of HeaderMatch.Trust.
	TrustTrusted = "trusted"
	TrustAny     = "any"
)

func fieldErr(path, format string, a ...any) error { return fielderr.Errorf(path, format, a...) }

// ImplicitController returns the controller of the implicit stage of c:
// DefaultController (auto, at its defaults) when c has no stages — a
// configuration that says nothing about control gets the default, as
// the proxy's quick start and the middleware do —, else
// ImplicitController (none): once stages are written, the requests none
// of them matches are the ones left out of control.
func (c *Config) ImplicitController() string {
	if len(c.Stages) == 0 {
		return DefaultController
	}
	return ImplicitController
}

// SetDefaults fills every unset field with its documented default, in
// place: the class order ["default"], the last class as the default
// class, trust "trusted" for header and cookie rules; for stages
// controller "auto" (its parameters default when decoded), burst 5,
// window 4096, queue.max 1024, queue.timeout 1s, long_lived 30s,
// differentiate true, priority.shed from the controller,
// priority.reserve 0.3 and tenants.default_weight 1; reject.status 503,
// reject.retry_after 1s and a one-line text body; the degrade.header
// "X-Sluice-Quality"; and the hops headers X-Sluice-Priority,
// X-Sluice-Tenant and X-Sluice-Timeout with hops.max_timeout 5m.
// Controller parameters are defaulted by their controller when decoded.
func (c *Config) SetDefaults() {
	if len(c.Classes.Order) == 0 {
		c.Classes.Order = []string{DefaultClass}
	}
	if c.Classes.Default == "" {
		c.Classes.Default = c.Classes.Order[len(c.Classes.Order)-1]
	}
	for i := range c.Classes.Rules {
		r := &c.Classes.Rules[i]
		if r.Header != nil && r.Header.Trust == "" {
			r.Header.Trust = TrustTrusted
		}
		if r.Cookie != nil && r.Cookie.Trust == "" {
			r.Cookie.Trust = TrustTrusted
		}
	}
	for i := range c.Stages {
		s := &c.Stages[i]
		if s.Controller == "" {
			s.Controller = DefaultController
			if name, ok := ControllerName(s.Control); ok {
				s.Controller = name
			}
		}
		s.Burst = cmp.Or(s.Burst, DefaultBurst)
		s.Window = cmp.Or(s.Window, DefaultWindow)
		s.Queue.Max = cmp.Or(s.Queue.Max, DefaultQueueMax)
		s.Queue.Timeout = cmp.Or(s.Queue.Timeout, DefaultQueueTimeout)
		s.LongLived = cmp.Or(s.LongLived, DefaultLongLived)
		if s.Differentiate == nil {
			t := true
			s.Differentiate = &t
		}
		if s.Priority.Shed == nil {
			if ctrl, err := control.NewConfig(s.Controller); err == nil {
				shed := !control.NeedsOf(ctrl).PriorityOptIn
				s.Priority.Shed = &shed
			}
		}
		s.Priority.Reserve = cmp.Or(s.Priority.Reserve, DefaultReserve)
		s.Tenants.DefaultWeight = cmp.Or(s.Tenants.DefaultWeight, stage.DefaultTenantWeight)
		s.Tenants.Key = cmp.Or(s.Tenants.Key, TenantKeyHop)
		if s.Tenants.Cost == "" {
			s.Tenants.Cost = string(stage.CostRequests)
		}
		s.Tenants.IPv4Prefix = cmp.Or(s.Tenants.IPv4Prefix, 32)
		s.Tenants.IPv6Prefix = cmp.Or(s.Tenants.IPv6Prefix, 128)
	}
	c.Reject.Status = cmp.Or(c.Reject.Status, DefaultRejectStatus)
	c.Reject.RetryAfter = cmp.Or(c.Reject.RetryAfter, DefaultRetryAfter)
	if c.Reject.RetryAfterMax == 0 {
		c.Reject.RetryAfterMax = max(DefaultRetryAfterMax, c.Reject.RetryAfter)
	}
	c.Reject.ContentType = cmp.Or(c.Reject.ContentType, DefaultContentType)
	c.Reject.Body = cmp.Or(c.Reject.Body, DefaultRejectBody)
	c.Degrade.Header = cmp.Or(c.Degrade.Header, DefaultDegradeHeader)
	h := &c.Hops
	hopnames.SetDefaults(&h.PriorityHeader, &h.TenantHeader, &h.TimeoutHeader)
	h.MaxTimeout = cmp.Or(h.MaxTimeout, DefaultMaxTimeout)
}

// Validate reports the first invalid setting as a *sluice.FieldError naming its
// path and value. Call it after SetDefaults: an unset field that has a
// default is invalid here (status 0 is not an HTTP status). Validate
// decodes every stage's params strictly (an unknown key is an error that
// lists the valid ones) and validates the resulting controller
// configuration.
func (c *Config) Validate() error {
	_, err := compile(c)
	return err
}

// clone returns a deep copy of the parts of c that SetDefaults and New
// modify or keep.
func (c *Config) clone() Config {
	out := *c
	out.Classes.Order = slices.Clone(c.Classes.Order)
	out.Classes.TrustedProxies = slices.Clone(c.Classes.TrustedProxies)
	out.Classes.Rules = slices.Clone(c.Classes.Rules)
	for i := range out.Classes.Rules {
		r := &out.Classes.Rules[i]
		if r.Header != nil {
			h := *r.Header
			r.Header = &h
		}
		if r.Cookie != nil {
			h := *r.Cookie
			r.Cookie = &h
		}
		if r.ClientCert != nil {
			m := *r.ClientCert
			r.ClientCert = &m
		}
		r.CIDRs = slices.Clone(r.CIDRs)
	}
	out.Stages = slices.Clone(c.Stages)
	for i := range out.Stages {
		s := &out.Stages[i]
		s.Match.Methods = slices.Clone(s.Match.Methods)
		if s.ClassTargets != nil {
			m := make(map[string]time.Duration, len(s.ClassTargets))
			for k, v := range s.ClassTargets {
				m[k] = v
			}
			s.ClassTargets = m
		}
		if s.Differentiate != nil {
			d := *s.Differentiate
			s.Differentiate = &d
		}
		if s.Priority.Shed != nil {
			d := *s.Priority.Shed
			s.Priority.Shed = &d
		}
		s.Tenants.Weights = maps.Clone(s.Tenants.Weights)
	}
	return out
}

// compiled is a validated configuration ready to be instantiated.
type compiled struct {
	cfg     Config
	classes map[string]int
	cls     classify.Config
	stages  []compiledStage
	reject  *rejecter
}

// compiledStage is one validated stage.
type compiledStage struct {
	cfg  StageConfig
	ctrl control.Config
	// fp identifies the stage's live state: a previous stage with an equal
	// fingerprint and name is reused on reload.
	fp fingerprint
	// tenantKey names a request's tenant (tenants.key).
	tenantKey tenantKey
}

// fingerprint is everything a stage.Stage is built from.
type fingerprint struct {
	ctrl         control.Config
	classes      []string
	burst        int
	window       int
	maxQueue     int
	queueTimeout time.Duration
	shadow       bool
	priority     stage.Priority
	tenants      stage.Tenants
	hog          stage.Hog
}

func (f *fingerprint) equal(g *fingerprint) bool { return reflect.DeepEqual(f, g) }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func compile(c *Config) (*compiled, error) {
	out := &compiled{cfg: *c, classes: map[string]int{}}
	if err := compileClasses(c, out); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for i := range c.Stages {
		cs, rule, err := compileStage(c, i, out.classes)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[cs.cfg.Name]; dup {
			return nil, fieldErr(fmt.Sprintf("stages[%d].name", i), "%q is already the name of stages[%d]", cs.cfg.Name, j)
		}
		seen[cs.cfg.Name] = i
		out.stages = append(out.stages, cs)
		out.cls.Stages = append(out.cls.Stages, rule)
	}
	rej, err := compileReject(&c.Reject)
	if err != nil {
		return nil, err
	}
	out.reject = rej
	if !httpx.IsToken(c.Degrade.Header) {
		return nil, fieldErr("degrade.header", "%q is not a valid header name", c.Degrade.Header)
	}
	if err := compileHops(c, out); err != nil {
		return nil, err
	}
	return out, nil
}

// compileHops checks the hops section and sets the classifier's reading
// of the hop headers.
func compileHops(c *Config, out *compiled) error {
	h := &c.Hops
	seen := map[string]string{http.CanonicalHeaderKey(c.Degrade.Header): "degrade.header"}
	for _, f := range []struct{ path, v string }{{"hops.priority_header", h.PriorityHeader},
		{"hops.tenant_header", h.TenantHeader}, {"hops.timeout_header", h.TimeoutHeader}} {
		if !httpx.IsToken(f.v) {
			return fieldErr(f.path, "%q is not a valid header name", f.v)
		}
		k := http.CanonicalHeaderKey(f.v)
		if other, dup := seen[k]; dup {
			return fieldErr(f.path, "%q is already %s", f.v, other)
		}
		seen[k] = f.path
	}
	if h.MinTimeout < 0 {
		return fieldErr("hops.min_timeout", "%v must be ≥ 0", h.MinTimeout)
	}
	if h.MaxTimeout <= 0 {
		return fieldErr("hops.max_timeout", "%v must be a positive duration such as 5m", h.MaxTimeout)
	}
	if h.MaxTimeout < h.MinTimeout {
		return fieldErr("hops.max_timeout", "%v must be ≥ hops.min_timeout (%v)", h.MaxTimeout, h.MinTimeout)
	}
	out.cls.Hop = &classify.HopConfig{PriorityHeader: h.PriorityHeader, TenantHeader: h.TenantHeader, TimeoutHeader: h.TimeoutHeader,
		Classes: slices.Clone(c.Classes.Order), MinTimeout: h.MinTimeout, MaxTimeout: h.MaxTimeout}
	return nil
}

func compileClasses(c *Config, out *compiled) error {
	cc := &c.Classes
	if len(cc.Order) == 0 {
		return fieldErr("classes.order", "must list at least one class (SetDefaults gives [%s])", DefaultClass)
	}
	for i, n := range cc.Order {
		p := fmt.Sprintf("classes.order[%d]", i)
		if !nameRE.MatchString(n) {
			return fieldErr(p, "%q is not a valid class name (letters, digits, '_', '.', '-')", n)
		}
		if j, dup := out.classes[n]; dup {
			return fieldErr(p, "%q is listed twice (also classes.order[%d])", n, j)
		}
		out.classes[n] = i
	}
	valid := strings.Join(cc.Order, ", ")
	def, ok := out.classes[cc.Default]
	if !ok {
		return fieldErr("classes.default", "%q is not a class of classes.order (%s)", cc.Default, valid)
	}
	out.cls.DefaultClass = def
	for i, r := range cc.Rules {
		p := fmt.Sprintf("classes.rules[%d]", i)
		ci, ok := out.classes[r.Class]
		if !ok {
			return fieldErr(p+".class", "%q is not a class of classes.order (%s)", r.Class, valid)
		}
		if r.Header == nil && r.Cookie == nil && len(r.CIDRs) == 0 && r.ClientCert == nil {
			return fieldErr(p, "a rule needs at least one condition: header, cookie, cidrs or client_cert")
		}
		rule := classify.ClassRule{Class: ci}
		if r.ClientCert != nil {
			rule.ClientCert = &classify.CertMatch{Value: r.ClientCert.Value}
		}
		var err error
		if rule.Header, err = compileMatch(p+".header", r.Header, httpx.IsToken); err != nil {
			return err
		}
		if rule.Cookie, err = compileMatch(p+".cookie", r.Cookie, validCookieName); err != nil {
			return err
		}
		for j, s := range r.CIDRs {
			pf, err := netprefix.Parse(s)
			if err != nil {
				return fieldErr(fmt.Sprintf("%s.cidrs[%d]", p, j), "%q is not a CIDR or address: %v", s, err)
			}
			rule.CIDRs = append(rule.CIDRs, pf)
		}
		out.cls.Rules = append(out.cls.Rules, rule)
	}
	for i, s := range cc.TrustedProxies {
		pf, err := netprefix.Parse(s)
		if err != nil {
			return fieldErr(fmt.Sprintf("classes.trusted_proxies[%d]", i), "%q is not a CIDR or address: %v", s, err)
		}
		out.cls.TrustedProxies = append(out.cls.TrustedProxies, pf)
	}
	return nil
}

func compileMatch(p string, m *HeaderMatch, valid func(string) bool) (*classify.Match, error) {
	if m == nil {
		return nil, nil
	}
	if !valid(m.Name) {
		return nil, fieldErr(p+".name", "%q is not a valid name", m.Name)
	}
	out := &classify.Match{Name: m.Name, Value: m.Value}
	switch m.Trust {
	case "", TrustTrusted:
		out.Trusted = true
	case TrustAny:
	default:
		return nil, fieldErr(p+".trust", "%q is not %q or %q", m.Trust, TrustTrusted, TrustAny)
	}
	return out, nil
}

func compileStage(c *Config, i int, classes map[string]int) (compiledStage, classify.StageRule, error) {
	s := c.Stages[i]
	p := fmt.Sprintf("stages[%d]", i)
	rule, err := compileStageMatch(p, &s)
	if err != nil {
		return compiledStage{}, rule, err
	}
	n := len(c.Classes.Order)
	if s.Burst < 1 {
		return compiledStage{}, rule, fieldErr(p+".burst", "%d must be ≥ 1", s.Burst)
	}
	if s.Window < 1 {
		return compiledStage{}, rule, fieldErr(p+".window", "%d must be ≥ 1", s.Window)
	}
	if s.Queue.Max < 1 {
		return compiledStage{}, rule, fieldErr(p+".queue.max", "%d must be ≥ 1", s.Queue.Max)
	}
	if s.Queue.Timeout <= 0 {
		return compiledStage{}, rule, fieldErr(p+".queue.timeout", "%v must be > 0", s.Queue.Timeout)
	}
	if s.LongLived <= 0 {
		return compiledStage{}, rule, fieldErr(p+".long_lived", "%v must be > 0", s.LongLived)
	}
	ctrl, err := stageControl(p, &s)
	if err != nil {
		return compiledStage{}, rule, err
	}
	if s.RateLimitHeaders && !control.NeedsOf(ctrl).Quota {
		return compiledStage{}, rule, fieldErr(p+".ratelimit_headers", "is only for a stage with a fixed quota (controller %s), not %s",
			control.NamesWhereText(func(n control.Needs) bool { return n.Quota }), s.Controller)
	}
	differentiate := s.Differentiate == nil || *s.Differentiate
	if err := compileClassTargets(p, &s, ctrl, c.Classes.Order, classes, differentiate); err != nil {
		return compiledStage{}, rule, err
	}
	if err := ctrl.Validate(); err != nil {
		return compiledStage{}, rule, controlErr(p, err, c.Classes.Order)
	}
	if _, err := ctrl.New(); err != nil {
		return compiledStage{}, rule, controlErr(p, err, c.Classes.Order)
	}
	prio, err := compilePriority(p, &s, ctrl, n, differentiate)
	if err != nil {
		return compiledStage{}, rule, err
	}
	ten, err := compileTenants(p, &s, ctrl)
	if err != nil {
		return compiledStage{}, rule, err
	}
	tkey, err := compileTenantKey(p, &s)
	if err != nil {
		return compiledStage{}, rule, err
	}
	hog, err := compileHog(p, &s, ctrl)
	if err != nil {
		return compiledStage{}, rule, err
	}
	cs := compiledStage{cfg: s, ctrl: ctrl, fp: fingerprint{ctrl: ctrl, classes: slices.Clone(c.Classes.Order),
		burst: s.Burst, window: s.Window, maxQueue: s.Queue.Max, queueTimeout: s.Queue.Timeout, shadow: c.Shadow,
		priority: prio, tenants: ten, hog: hog}, tenantKey: tkey}
	return cs, rule, nil
}

// compileTenants checks a stage's tenants section and returns the stage's
// fair-queueing options.
func compileTenants(p string, s *StageConfig, ctrl control.Config) (stage.Tenants, error) {
	tc := s.Tenants
	tc.DefaultWeight = cmp.Or(tc.DefaultWeight, stage.DefaultTenantWeight)
	if !(tc.DefaultWeight > 0) || math.IsInf(tc.DefaultWeight, 0) {
		return stage.Tenants{}, fieldErr(p+".tenants.default_weight", "%v must be a finite weight > 0, such as 1", s.Tenants.DefaultWeight)
	}
	names := slices.Sorted(maps.Keys(tc.Weights))
	for _, k := range names {
		if w := tc.Weights[k]; !(w > 0) || math.IsInf(w, 0) {
			return stage.Tenants{}, fieldErr(p+".tenants.weights."+k, "%v must be a finite weight > 0, such as 2", w)
		}
	}
	if c, err := ctrl.New(); tc.Fair && (err != nil || c.Current().Kind != sluice.KindConcurrency) {
		return stage.Tenants{}, fieldErr(p+".tenants", "fair queueing needs a wait queue: a controller with a concurrency limit (auto, static-concurrency), not %s", s.Controller)
	}
	if len(tc.Weights) > 0 && !tc.Fair {
		return stage.Tenants{}, fieldErr(p+".tenants.weights", "weights need fair: true")
	}
	cost := stage.CostMeasure(tc.Cost)
	cost = cmp.Or(cost, stage.CostRequests)
	if !slices.Contains(stage.CostMeasures, cost) {
		names := make([]string, len(stage.CostMeasures))
		for i, m := range stage.CostMeasures {
			names[i] = string(m)
		}
		return stage.Tenants{}, fieldErr(p+".tenants.cost", "%q must be %s", tc.Cost, strings.Join(names, ", "))
	}
	if cost != stage.CostRequests && !tc.Fair {
		return stage.Tenants{}, fieldErr(p+".tenants.cost", "%q needs fair: true", tc.Cost)
	}
	if tc.SlotShare && !tc.Fair {
		return stage.Tenants{}, fieldErr(p+".tenants.slot_share", "needs fair: true")
	}
	if b := tc.DeadlineBudget; b != 0 && (!(b > 0) || math.IsInf(b, 0) || cost != stage.CostServiceTime) {
		return stage.Tenants{}, fieldErr(p+".tenants.deadline_budget", "%v must be a finite multiple ≥ 0 of the tenant's service time, such as 1, and needs cost: service_time", b)
	}
	return stage.Tenants{Fair: tc.Fair, Weights: maps.Clone(tc.Weights), DefaultWeight: tc.DefaultWeight, Cost: cost, SlotShare: tc.SlotShare,
		DeadlineBudget: tc.DeadlineBudget}, nil
}

// compileTenantKey checks a stage's tenants.key and its prefix lengths.
func compileTenantKey(p string, s *StageConfig) (tenantKey, error) {
	tc := &s.Tenants
	key, v4, v6 := tc.Key, tc.IPv4Prefix, tc.IPv6Prefix
	key = cmp.Or(key, TenantKeyHop)
	v4 = cmp.Or(v4, 32)
	v6 = cmp.Or(v6, 128)
	k, ok := parseTenantKey(key, v4, v6)
	if !ok {
		return tenantKey{}, fieldErr(p+".tenants.key", "%q must be hop, client, client-cert, path or header:<Name> (Name an HTTP header name, e.g. header:X-Customer)", tc.Key)
	}
	if v4 < 1 || v4 > 32 {
		return tenantKey{}, fieldErr(p+".tenants.ipv4_prefix", "%d must be a prefix length within [1, 32], such as 24", v4)
	}
	if v6 < 1 || v6 > 128 {
		return tenantKey{}, fieldErr(p+".tenants.ipv6_prefix", "%d must be a prefix length within [1, 128], such as 64", v6)
	}
	if k.kind != tenantClient && (tc.IPv4Prefix != 0 && tc.IPv4Prefix != 32 || tc.IPv6Prefix != 0 && tc.IPv6Prefix != 128) {
		return tenantKey{}, fieldErr(p+".tenants.key", "%q: ipv4_prefix and ipv6_prefix need key: client", key)
	}
	if key != TenantKeyHop && !tc.Fair {
		return tenantKey{}, fieldErr(p+".tenants.key", "%q needs fair: true", key)
	}
	return k, nil
}

// compilePriority checks a stage's priority section and returns the
// stage's priority options.
func compilePriority(p string, s *StageConfig, ctrl control.Config, classes int, differentiate bool) (stage.Priority, error) {
	pc := s.Priority
	if !(pc.Reserve > 0 && pc.Reserve < 1) {
		return stage.Priority{}, fieldErr(p+".priority.reserve", "%v must be within (0, 1), such as 0.3", pc.Reserve)
	}
	out := stage.Priority{Shed: stage.ShedDefault, Reserve: pc.Reserve}
	if pc.Shed != nil {
		out.Shed = stage.ShedOff
		if *pc.Shed {
			out.Shed = stage.ShedOn
		}
	}
	if _, isSEDA := ctrl.(*control.SEDAConfig); isSEDA && out.Shed == stage.ShedOn && classes > 1 && differentiate {
		return stage.Priority{}, fieldErr(p+".priority.shed",
			"seda with one controller per class sheds by the paper's class law (adjlo_d, lc_thresh); to shed one shared bucket by priority, set %s.differentiate: false", p)
	}
	return out, nil
}

// controlErr maps a controller validation error to the stage's path.
func controlErr(p string, err error, order []string) error {
	field := control.FieldOf(err)
	if field == "" {
		return &sluice.FieldError{Path: p + ".params", Msg: err.Error()}
	}
	msg := strings.TrimPrefix(err.Error(), field+": ")
	var idx int
	if _, scanErr := fmt.Sscanf(field, "class_targets[%d]", &idx); scanErr == nil && idx >= 0 && idx < len(order) {
		return &sluice.FieldError{Path: p + ".class_targets." + order[idx], Msg: msg}
	}
	return &sluice.FieldError{Path: p + ".params." + field, Msg: msg}
}

// reservedParams are controller fields the policy sets itself.
var reservedParams = map[string]string{
	"classes":       "is set from classes.order",
	"class_targets": "is set from the stage's class_targets (by class name)",
}

// decodeParams decodes a stage's params strictly into dst (a pointer to a
// control.XConfig holding its defaults) with sluice's one strict decoder:
// every key must be a field of the struct (by YAML name), recursively, and
// an error names its key's path and line. The policy's own keys (classes,
// class_targets) are refused in a seda stage's params.
func decodeParams(p string, n *yaml.Node, dst control.Config) error {
	if n == nil || n.Kind == 0 {
		return nil
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n = strictyaml.Resolve(n); n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return &sluice.FieldError{Path: p, Msg: fmt.Sprintf("must be a mapping of parameter names to values, not %s", nodeKind(n)), Line: n.Line}
	}
	if _, isSEDA := dst.(*control.SEDAConfig); isSEDA {
		if err := refuseReserved(p, n); err != nil {
			return err
		}
	}
	return strictyaml.Decode(n, dst, p)
}

// refuseReserved reports a reserved key among n's keys (merged ones too).
func refuseReserved(p string, n *yaml.Node) error {
	for _, k := range strictyaml.Keys(n) {
		if why, res := reservedParams[k.Value]; res {
			return &sluice.FieldError{Path: p + "." + k.Value, Msg: "must not be set in params: it " + why, Line: k.Line}
		}
	}
	return nil
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.ScalarNode:
		return fmt.Sprintf("the scalar %q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "this node"
}

func compileReject(r *RejectConfig) (*rejecter, error) {
	if r.Status < 400 || r.Status > 599 {
		return nil, fieldErr("reject.status", "%d must be an HTTP error status within 400–599", r.Status)
	}
	if r.RetryAfter <= 0 {
		return nil, fieldErr("reject.retry_after", "%v must be > 0 (clients need a Retry-After)", r.RetryAfter)
	}
	if r.RetryAfterMax < r.RetryAfter {
		return nil, fieldErr("reject.retry_after_max", "%v must be ≥ retry_after (%v); equal to it sends a fixed Retry-After", r.RetryAfterMax, r.RetryAfter)
	}
	if r.RetryJitter < 0 {
		return nil, fieldErr("reject.retry_jitter", "%v must be ≥ 0", r.RetryJitter)
	}
	mt, _, err := mime.ParseMediaType(r.ContentType)
	if err != nil {
		return nil, fieldErr("reject.content_type", "%q is not a media type: %v", r.ContentType, err)
	}
	rej, err := newRejecter(r, mt)
	if err != nil {
		return nil, fieldErr("reject.body", "%v", err)
	}
	if err := rej.tmpl.Execute(io.Discard, bodyData{Stage: "api", Class: "default", RetryAfter: 1}); err != nil {
		return nil, fieldErr("reject.body", "template fails on sample data: %v", err)
	}
	return rej, nil
}

// validCookieName: a cookie name is a token.
func validCookieName(s string) bool { return httpx.IsToken(s) }

func isStandardMethod(m string) bool {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE":
		return true
	}
	return false
}

// grpcNameRE is a protobuf full name: dot-separated identifiers.
var grpcNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// compileGRPC compiles match.grpc_service and match.grpc_method into
// rule (a path prefix, an exact path).
func compileGRPC(p string, m MatchConfig, rule *classify.StageRule) error {
	if m.GRPCService == "" && m.GRPCMethod == "" {
		return nil
	}
	field := p + ".grpc_service"
	if m.GRPCMethod != "" {
		field = p + ".grpc_method"
	}
	switch {
	case m.GRPCService != "" && m.GRPCMethod != "":
		return fieldErr(p+".grpc_method", "set grpc_service or grpc_method, not both")
	case m.PathPrefix != "" || m.PathRegex != "":
		return fieldErr(field, "excludes path_prefix and path_regex: a gRPC call's path is its method's name")
	}
	if s := m.GRPCService; s != "" {
		if !grpcNameRE.MatchString(s) {
			return fieldErr(field, "%q is not a service's full name such as grpc.testing.TestService", s)
		}
		rule.PathPrefix = "/" + s + "/"
		return nil
	}
	svc, meth, ok := strings.Cut(strings.TrimPrefix(m.GRPCMethod, "/"), "/")
	if !ok || !strings.HasPrefix(m.GRPCMethod, "/") || !grpcNameRE.MatchString(svc) || !grpcNameRE.MatchString(meth) || strings.Contains(meth, ".") {
		return fieldErr(field, "%q is not a method's full name such as /grpc.testing.TestService/UnaryCall", m.GRPCMethod)
	}
	rule.Path = m.GRPCMethod
	return nil
}
