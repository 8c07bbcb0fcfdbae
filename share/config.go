// SPDX-License-Identifier: Apache-2.0

package share

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/httpx"
	"github.com/sluicehq/sluice/internal/netprefix"
	"github.com/sluicehq/sluice/internal/secret"
)

// APIKey is a client's API key: a secret, which every printer and encoder
// (fmt, log/slog, YAML, JSON, so GET /config and the logs) shows as
// "<redacted>"; its Reveal method returns the key. Write one as a string
// constant (share.APIKey("k-1")) or convert a string.
type APIKey = secret.String

// Defaults and bounds of a Config (docs/algorithms.md §3).
const (
	// DefaultAlpha is the default EWMA weight α of a new bandwidth sample.
	// Li & Jamin report that values in [0.05, 0.30] work well; 0.2 sits in
	// the middle of that range and lets a client's average follow a change
	// in about five replies (1 − 0.8⁵ ≈ 67 %).
	DefaultAlpha = 0.2
	// MinAlpha and MaxAlpha bound Config.Alpha (the paper's range).
	MinAlpha, MaxAlpha = 0.05, 0.30

	// DefaultPeriod is the default manager period (the paper: every half
	// to one second).
	DefaultPeriod = time.Second
	// MinPeriod and MaxPeriod bound Config.Period (the paper's range).
	MinPeriod, MaxPeriod = 500 * time.Millisecond, time.Second

	// DefaultStandbyLimit is the default number of requests of one client
	// allowed to wait in the share mechanism at once.
	DefaultStandbyLimit = 10
	// MaxStandbyLimit is the largest accepted Config.StandbyLimit.
	MaxStandbyLimit = 1_000_000

	// DefaultMaxDelay is the default longest delay injected before a
	// reply; a longer computed delay rejects the request instead.
	DefaultMaxDelay = 10 * time.Second
	// MaxMaxDelay is the largest accepted Config.MaxDelay.
	MaxMaxDelay = time.Hour

	// DefaultCacheSize is the default cap on the address→client cache of
	// the Matcher. A full cache under churn (entries evicted and replaced)
	// takes about 120 bytes per entry, 7.4 MB at this cap, measured by
	// TestMillionDistinctAddressesStayBounded, whose bound is 12 MB.
	DefaultCacheSize = 65536
	// MaxCacheSize is the largest accepted Config.CacheSize.
	MaxCacheSize = 1 << 24

	// DefaultClientHeader is the default header naming the client when the
	// peer is trusted.
	DefaultClientHeader = "X-Sluice-Client"
	// DefaultAPIKeyHeader is the default header carrying an API key.
	DefaultAPIKeyHeader = "X-Api-Key"

	// DefaultReplyBuffer is the default bound, in bytes, on a reply the
	// middleware buffers to learn its size when the handler sets no
	// Content-Length.
	DefaultReplyBuffer = 1 << 20
	// MaxReplyBuffer is the largest accepted Config.ReplyBuffer.
	MaxReplyBuffer = 1 << 30

	// OthersName is the name of the implicit client that receives every
	// unmatched request and the share the configured clients leave.
	OthersName = "others"

	// maxTotalBandwidth keeps the arithmetic far from overflow (1 PB/s).
	maxTotalBandwidth = 1e15
	// maxNameLen bounds a client name (it becomes a metric label value).
	maxNameLen = 64
	// shareEpsilon absorbs rounding in a sum of percentages such as
	// 33.3 + 33.3 + 33.4.
	shareEpsilon = 1e-9
)

// Config configures a Shares and its Matcher. Start from DefaultConfig,
// decode YAML over it (unknown fields are errors), set TotalBandwidth and
// Clients, then call Validate (New does).
//
// Example (the setup of the paper's Table II):
//
//	total_bandwidth: 100KB/s
//	clients:
//	  - {name: a, share: 10, cidrs: [10.0.0.1]}
//	  - {name: b, share: 20, cidrs: [10.0.0.2]}
//	  - {name: c, share: 30, cidrs: [10.0.1.0/24]}
//	  - {name: d, share: 40, api_keys: [k-d-1]}
type Config struct {
	// TotalBandwidth is B, the total the clients share, in bytes per
	// second. It has no default and must be > 0.
	TotalBandwidth Bandwidth `yaml:"total_bandwidth" json:"total_bandwidth"`
	// InitialMaxBandwidth is the starting value of Â, the maximum measured
	// bandwidth, in bytes per second. 0 (the default) starts Â at
	// TotalBandwidth, as §3 prescribes; otherwise it must be ≥
	// TotalBandwidth. Â only grows afterwards (Â = max(Â, Σ avg_j)). An
	// operator who knows the maximum a running server has measured may
	// start there to skip the warm-up during which the shares overshoot
	// (see the package documentation, "Accuracy").
	InitialMaxBandwidth Bandwidth `yaml:"initial_max_bandwidth" json:"initial_max_bandwidth"`
	// Alpha is the EWMA weight α of a new per-reply bandwidth sample, in
	// [0.05, 0.30] (default 0.2). The manager uses the same α to decay the
	// average of an idle client toward zero.
	Alpha float64 `yaml:"alpha" json:"alpha"`
	// Period is the manager period, in [0.5s, 1s] (default 1s).
	Period time.Duration `yaml:"period" json:"period"`
	// StandbyLimit is the number of requests of one client allowed to wait
	// in the mechanism at once (default 10, at least 1): a request holds a
	// standby slot from Begin until its delay is over. A request that
	// finds all of its client's slots taken is rejected at once.
	StandbyLimit int `yaml:"standby_limit" json:"standby_limit"`
	// MaxDelay is the longest delay injected before a reply (default 10s,
	// in (0, 1h]). A request whose computed delay is longer is rejected at
	// once instead of being held, so a client never waits longer than
	// MaxDelay for the mechanism.
	MaxDelay time.Duration `yaml:"max_delay" json:"max_delay"`
	// CacheSize caps the Matcher's address→client cache (default 65536,
	// at most 2^24; 0 disables the cache). The least recently used entry
	// is evicted when the cache is full.
	CacheSize int `yaml:"cache_size" json:"cache_size"`
	// ClientHeader is the header whose value names a client's
	// header_values entry when the peer is trusted (default
	// X-Sluice-Client). The header is ignored from untrusted peers.
	ClientHeader string `yaml:"client_header" json:"client_header"`
	// APIKeyHeader is the header carrying an API key (default X-Api-Key).
	APIKeyHeader string `yaml:"api_key_header" json:"api_key_header"`
	// ReplyBuffer is the most bytes of a reply the middleware buffers to
	// learn its size when the handler sets no Content-Length (default
	// 1 MiB, in [0, 1 GiB]). See Middleware.
	ReplyBuffer int `yaml:"reply_buffer" json:"reply_buffer"`
	// Parallel delays every request of a client independently, as the
	// paper's Apache children did (default false). Shares are then shares
	// of per-reply bandwidth: a client with k requests in flight gets about
	// k times its share of the aggregate. By default a client's replies
	// take turns through their delay and send (waiting for the turn counts
	// against the standby limit), and each reply's bandwidth is measured
	// from the start of its turn, so the client's aggregate bandwidth
	// tracks its available bandwidth d_i however many requests it opens.
	Parallel bool `yaml:"parallel" json:"parallel"`
	// RateLimitHeaders sends the IETF RateLimit-Policy and RateLimit
	// fields (draft-ietf-httpapi-ratelimit-headers-10) with each client's
	// allocation and headroom in content bytes per second on its answers,
	// delayed, sent or rejected (default false). See Shares.RateLimit.
	RateLimitHeaders bool `yaml:"ratelimit_headers" json:"ratelimit_headers"`
	// Clients are the configured clients. Their shares sum to at most 100;
	// the rest goes to the implicit client "others".
	Clients []ClientConfig `yaml:"clients" json:"clients"`
}

// ClientConfig is one configured client: a name, a share of B, and the
// identities that select it. A request is matched by API key first, then by
// the client header (trusted peers only), then by the peer address (the
// longest matching prefix wins); a request that matches nothing belongs to
// others.
type ClientConfig struct {
	// Name identifies the client in metrics and /state: 1 to 64 letters,
	// digits, '_', '-', '.' or ':', starting with a letter or digit. It
	// must be unique and must not be "others".
	Name string `yaml:"name" json:"name"`
	// Share is the client's allocation b_i in percent of TotalBandwidth,
	// in (0, 100].
	Share float64 `yaml:"share" json:"share"`
	// CIDRs are addresses ("192.0.2.7") and prefixes ("10.0.0.0/8",
	// "2001:db8::/32") of the client. Host bits must be zero; a prefix may
	// appear in one client only. IPv4-mapped IPv6 peers (::ffff:a.b.c.d)
	// match as the IPv4 address they carry.
	CIDRs []string `yaml:"cidrs" json:"cidrs"`
	// HeaderValues are values of ClientHeader that name this client when
	// the peer is trusted. Each value may appear in one client only.
	HeaderValues []string `yaml:"header_values" json:"header_values"`
	// APIKeys are values of APIKeyHeader that name this client, compared
	// exactly as written here. Each key may appear in one client only.
	// They are secrets: shown as "<redacted>" everywhere.
	APIKeys []APIKey `yaml:"api_keys" json:"api_keys"`
	// APIKeysFile names a file holding this client's API keys, one per
	// line (blank lines and lines starting with # skipped), which the
	// proxy's configuration loader reads at start and on every reload (a
	// mounted Kubernetes Secret rotates without a restart); exclusive
	// with APIKeys. A Go program sets APIKeys instead.
	APIKeysFile string `yaml:"api_keys_file,omitempty" json:"api_keys_file,omitempty"`
}

// DefaultConfig returns the defaults of every optional field: Alpha 0.2,
// Period 1s, StandbyLimit 10, MaxDelay 10s, CacheSize 65536, ClientHeader
// "X-Sluice-Client", APIKeyHeader "X-Api-Key" and ReplyBuffer 1 MiB.
// TotalBandwidth and Clients have no default.
func DefaultConfig() Config {
	return Config{
		Alpha:        DefaultAlpha,
		Period:       DefaultPeriod,
		StandbyLimit: DefaultStandbyLimit,
		MaxDelay:     DefaultMaxDelay,
		CacheSize:    DefaultCacheSize,
		ClientHeader: DefaultClientHeader,
		APIKeyHeader: DefaultAPIKeyHeader,
		ReplyBuffer:  DefaultReplyBuffer,
	}
}

func badField(field string, v any, want string) error { return fielderr.Invalid(field, v, want) }

// Validate reports the first invalid field, naming its YAML path and value.
// It never changes c.
func (c *Config) Validate() error {
	_, err := c.compile()
	return err
}

// OthersShare returns the share of others in percent: 100 minus the sum of
// the configured shares (0 when they sum to 100; tiny negative rounding is
// reported as 0).
func (c *Config) OthersShare() float64 {
	sum := 0.0
	for _, cl := range c.Clients {
		sum += cl.Share
	}
	return math.Max(0, 100-sum)
}

// compiled is a validated configuration in the form the hot path uses.
type compiled struct {
	names    []string  // client names; others is last
	shares   []float64 // percent; others last
	prefixes netprefix.Table[ClientID]
	headers  map[string]ClientID
	apiKeys  map[string]ClientID
	clientH  string // canonical header names
	apiKeyH  string
}

func (c *Config) compile() (*compiled, error) {
	if err := c.validateSettings(); err != nil {
		return nil, err
	}
	n := len(c.Clients)
	cc := &compiled{
		names:   make([]string, n+1),
		shares:  make([]float64, n+1),
		headers: make(map[string]ClientID),
		apiKeys: make(map[string]ClientID),
		clientH: canonicalHeader(c.ClientHeader),
		apiKeyH: canonicalHeader(c.APIKeyHeader),
	}
	byName := make(map[string]int, n)
	sum := 0.0
	for i, cl := range c.Clients {
		field := fmt.Sprintf("clients[%d]", i)
		var err error
		if sum, err = checkClient(field, cl, byName, sum); err != nil {
			return nil, err
		}
		byName[cl.Name] = i
		cc.names[i], cc.shares[i] = cl.Name, cl.Share
		if err := cc.addMatchers(field, ClientID(i), cl); err != nil {
			return nil, err
		}
	}
	cc.names[n], cc.shares[n] = OthersName, c.OthersShare()
	return cc, nil
}

// validateSettings reports the first invalid field among the settings
// outside clients.
func (c *Config) validateSettings() error {
	tb, im := float64(c.TotalBandwidth), float64(c.InitialMaxBandwidth)
	const headerName = "must be a non-empty HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"
	return fielderr.First(
		fielderr.If(math.IsNaN(tb) || tb <= 0 || tb > maxTotalBandwidth, "total_bandwidth", c.TotalBandwidth,
			fmt.Sprintf("must be > 0 and at most %g bytes per second (for example 100KB/s)", maxTotalBandwidth)),
		fielderr.If(im != 0 && (math.IsNaN(im) || im < tb || im > maxTotalBandwidth), "initial_max_bandwidth", c.InitialMaxBandwidth,
			fmt.Sprintf("must be 0 (start at total_bandwidth) or in [total_bandwidth = %g, %g] bytes per second", tb, maxTotalBandwidth)),
		fielderr.If(math.IsNaN(c.Alpha) || c.Alpha < MinAlpha || c.Alpha > MaxAlpha, "alpha", c.Alpha, fmt.Sprintf("must be in [%g, %g]", MinAlpha, MaxAlpha)),
		fielderr.If(c.Period < MinPeriod || c.Period > MaxPeriod, "period", c.Period, fmt.Sprintf("must be in [%v, %v]", MinPeriod, MaxPeriod)),
		fielderr.If(c.StandbyLimit < 1 || c.StandbyLimit > MaxStandbyLimit, "standby_limit", c.StandbyLimit,
			fmt.Sprintf("must be in [1, %d] (requests)", MaxStandbyLimit)),
		fielderr.If(c.MaxDelay <= 0 || c.MaxDelay > MaxMaxDelay, "max_delay", c.MaxDelay, fmt.Sprintf("must be in (0, %v]", MaxMaxDelay)),
		fielderr.If(c.CacheSize < 0 || c.CacheSize > MaxCacheSize, "cache_size", c.CacheSize,
			fmt.Sprintf("must be in [0, %d] (entries; 0 disables the cache)", MaxCacheSize)),
		fielderr.If(c.ReplyBuffer < 0 || c.ReplyBuffer > MaxReplyBuffer, "reply_buffer", c.ReplyBuffer,
			fmt.Sprintf("must be in [0, %d] (bytes)", MaxReplyBuffer)),
		fielderr.If(!httpx.IsToken(c.ClientHeader), "client_header", fmt.Sprintf("%q", c.ClientHeader), headerName),
		fielderr.If(!httpx.IsToken(c.APIKeyHeader), "api_key_header", fmt.Sprintf("%q", c.APIKeyHeader), headerName),
		fielderr.If(canonicalHeader(c.ClientHeader) == canonicalHeader(c.APIKeyHeader), "api_key_header", fmt.Sprintf("%q", c.APIKeyHeader),
			"must differ from client_header"),
	)
}

// checkClient reports the first invalid field of the client cl at field
// (its name, unique among the clients named before it in byName, and its
// share), and returns the sum of the shares with cl's.
func checkClient(field string, cl ClientConfig, byName map[string]int, sum float64) (float64, error) {
	if !validName(cl.Name) {
		return sum, badField(field+".name", fmt.Sprintf("%q", cl.Name), "must be 1 to 64 letters, digits, '_', '-', '.' or ':', starting with a letter or digit")
	}
	if cl.Name == OthersName {
		return sum, badField(field+".name", fmt.Sprintf("%q", cl.Name), "is reserved for the implicit client of unmatched requests")
	}
	if j, dup := byName[cl.Name]; dup {
		return sum, badField(field+".name", fmt.Sprintf("%q", cl.Name), fmt.Sprintf("the same name as clients[%d]", j))
	}
	if math.IsNaN(cl.Share) || cl.Share <= 0 || cl.Share > 100 {
		return sum, badField(field+".share", cl.Share, "must be in (0, 100] (percent of total_bandwidth)")
	}
	sum += cl.Share
	if sum > 100+shareEpsilon {
		return sum, badField(field+".share", cl.Share, fmt.Sprintf("brings the sum of the shares to %g; they must sum to at most 100 (the rest goes to %q)", sum, OthersName))
	}
	return sum, nil
}

// addMatchers adds what identifies client id (the client cl at field) to
// cc: its prefixes, header values and API keys, each listed for one client
// only.
func (cc *compiled) addMatchers(field string, id ClientID, cl ClientConfig) error {
	for k, s := range cl.CIDRs {
		p, err := netprefix.Parse(s)
		if err != nil {
			return badField(fmt.Sprintf("%s.cidrs[%d]", field, k), fmt.Sprintf("%q", s), err.Error())
		}
		if j, added := cc.prefixes.Insert(p, id); !added {
			return badField(fmt.Sprintf("%s.cidrs[%d]", field, k), fmt.Sprintf("%q", s), fmt.Sprintf("the same prefix is already listed for clients[%d]", j))
		}
	}
	for k, v := range cl.HeaderValues {
		f := fmt.Sprintf("%s.header_values[%d]", field, k)
		if v == "" {
			return badField(f, `""`, "must not be empty")
		}
		if j, dup := cc.headers[v]; dup {
			return badField(f, fmt.Sprintf("%q", v), fmt.Sprintf("the same value is already listed for clients[%d]", j))
		}
		cc.headers[v] = id
	}
	if cl.APIKeysFile != "" && len(cl.APIKeys) == 0 {
		return badField(field+".api_keys_file", fmt.Sprintf("%q", cl.APIKeysFile), "is read by the proxy's configuration loader: a Go program sets api_keys")
	}
	for k, key := range cl.APIKeys {
		f := fmt.Sprintf("%s.api_keys[%d]", field, k)
		v := key.Reveal()
		if v == "" {
			return badField(f, `""`, "must not be empty")
		}
		if j, dup := cc.apiKeys[v]; dup {
			// Never echo a key in an error message.
			return badField(f, "(key withheld)", fmt.Sprintf("the same key is already listed for clients[%d]", j))
		}
		cc.apiKeys[v] = id
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if i == 0 && !alnum {
			return false
		}
		if !alnum && c != '_' && c != '-' && c != '.' && c != ':' {
			return false
		}
	}
	return true
}
