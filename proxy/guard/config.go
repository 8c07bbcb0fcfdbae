// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"cmp"
	"os"
	"time"

	"github.com/sluicehq/sluice/internal/fielderr"
)

// Defaults of Config. Durations are wall-clock time.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 75 * time.Second
	DefaultMaxHeaderBytes    = 32 << 10
	// Client-side limits, in line with nginx's defaults (named after each).
	DefaultMaxHeaderLineBytes  = 8 << 10          // large_client_header_buffers 4 8k
	DefaultMaxURIBytes         = 8 << 10          // large_client_header_buffers: 414 beyond
	DefaultMaxHeaders          = 100              // Apache's LimitRequestFields (nginx: 32 KiB in all)
	DefaultReadBodyTimeout     = 60 * time.Second // client_body_timeout
	DefaultReadBodyMinRate     = 500              // bytes/s, Apache mod_reqtimeout's MinRate
	DefaultSendTimeout         = 60 * time.Second // send_timeout
	DefaultRequestBufferBytes  = 16 << 10         // client_body_buffer_size
	DefaultMaxRequestBodyBytes = 1 << 20          // client_max_body_size
)

// Config is one listener's guard: its timeouts, request size limits and
// request buffering. The proxy's ListenerConfig embeds it inline, so its
// keys are the listener's own (listeners[].read_timeout, …).
type Config struct {
	// ReadHeaderTimeout bounds the time to read a request's headers
	// (default 10s).
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds the time to read a whole request including its
	// body (default 0: no limit, so that uploads can stream).
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// ReadBodyTimeout bounds the wait for the next bytes of a request
	// body (default 60s; 0 in a file means the default). It is also the
	// grace period of ReadBodyMinRate.
	ReadBodyTimeout time.Duration `yaml:"read_body_timeout"`
	// ReadBodyMinRate is the slowest a request body may arrive, in bytes
	// per second: the body must be complete within ReadBodyTimeout plus
	// its size divided by this rate (default 500; -1 none).
	ReadBodyMinRate float64 `yaml:"read_body_min_rate"`
	// WriteTimeout bounds the time to write a response (default 0: no
	// limit, so that streams and server-sent events work).
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// SendTimeout bounds each write to the client: a client that reads
	// nothing for this long is disconnected (default 60s, nginx's
	// send_timeout).
	SendTimeout time.Duration `yaml:"send_timeout"`
	// IdleTimeout bounds how long an idle keep-alive connection is kept
	// (default 75s).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes bounds the size of a request's line and header
	// block in bytes (default 32 KiB; 431 beyond).
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxHeaderLineBytes bounds one header line "Name: value" in bytes
	// (default 8 KiB; 431 beyond).
	MaxHeaderLineBytes int `yaml:"max_header_line_bytes"`
	// MaxURIBytes bounds the request target in bytes (default 8 KiB; 414
	// beyond).
	MaxURIBytes int `yaml:"max_uri_bytes"`
	// MaxHeaders bounds the number of header lines (default 100; 431
	// beyond).
	MaxHeaders int `yaml:"max_headers"`
	// RequestBuffering reads each request body completely before the
	// request enters admission control, so that a slow upload never holds
	// a backend slot (default true; nginx's proxy_request_buffering).
	// Requests with Content-Type application/grpc are never buffered.
	RequestBuffering *bool `yaml:"request_buffering"`
	// RequestBufferBytes is how much of a buffered body is kept in memory,
	// in bytes; the rest goes to an unlinked temporary file (default 16
	// KiB).
	RequestBufferBytes int64 `yaml:"request_buffer_bytes"`
	// RequestBufferDir is the directory of those files (default: the
	// system's temporary directory).
	RequestBufferDir string `yaml:"request_buffer_dir,omitempty"`
	// MaxRequestBodyBytes bounds a request body in bytes (default 1 MiB,
	// nginx's client_max_body_size; -1 no limit; 413 beyond).
	MaxRequestBodyBytes int64 `yaml:"max_request_body_bytes"`
}

// SetDefaults fills the documented defaults of every unset field.
func (c *Config) SetDefaults() {
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultIdleTimeout)
	c.MaxHeaderBytes = cmp.Or(c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	c.ReadBodyTimeout = cmp.Or(c.ReadBodyTimeout, DefaultReadBodyTimeout)
	c.ReadBodyMinRate = cmp.Or(c.ReadBodyMinRate, DefaultReadBodyMinRate)
	c.SendTimeout = cmp.Or(c.SendTimeout, DefaultSendTimeout)
	c.MaxHeaderLineBytes = cmp.Or(c.MaxHeaderLineBytes, DefaultMaxHeaderLineBytes)
	c.MaxURIBytes = cmp.Or(c.MaxURIBytes, DefaultMaxURIBytes)
	c.MaxHeaders = cmp.Or(c.MaxHeaders, DefaultMaxHeaders)
	if c.RequestBuffering == nil {
		t := true
		c.RequestBuffering = &t
	}
	c.RequestBufferBytes = cmp.Or(c.RequestBufferBytes, DefaultRequestBufferBytes)
	c.MaxRequestBodyBytes = cmp.Or(c.MaxRequestBodyBytes, DefaultMaxRequestBodyBytes)
}

// Validate checks c (with its defaults set) and reports the first invalid
// field as a *sluice.FieldError whose path is the field's key
// ("read_timeout"); the proxy places it under the listener's path
// (fielderr.Under: "listeners[0].read_timeout").
func (c *Config) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read_header_timeout", c.ReadHeaderTimeout}, {"read_timeout", c.ReadTimeout},
		{"read_body_timeout", c.ReadBodyTimeout}, {"write_timeout", c.WriteTimeout},
		{"send_timeout", c.SendTimeout}, {"idle_timeout", c.IdleTimeout}} {
		if d.v < 0 {
			return fielderr.Errorf(d.name, "%v is invalid: must be a positive duration or 0", d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"max_header_bytes", int64(c.MaxHeaderBytes)}, {"max_header_line_bytes", int64(c.MaxHeaderLineBytes)},
		{"max_uri_bytes", int64(c.MaxURIBytes)}, {"max_headers", int64(c.MaxHeaders)}} {
		if n.v < 0 {
			return fielderr.Errorf(n.name, "%d is invalid: must be > 0", n.v)
		}
	}
	if c.ReadBodyMinRate < 0 && c.ReadBodyMinRate != -1 {
		return fielderr.Errorf("read_body_min_rate", "%v is invalid: must be a rate in bytes per second > 0, or -1 for none", c.ReadBodyMinRate)
	}
	if c.RequestBufferBytes < 0 {
		return fielderr.Errorf("request_buffer_bytes", "%d is invalid: must be > 0", c.RequestBufferBytes)
	}
	if c.MaxRequestBodyBytes < -1 {
		return fielderr.Errorf("max_request_body_bytes", "%d is invalid: must be > 0, or -1 for no limit", c.MaxRequestBodyBytes)
	}
	if c.RequestBufferDir != "" {
		if fi, err := os.Stat(c.RequestBufferDir); err != nil || !fi.IsDir() {
			return fielderr.Errorf("request_buffer_dir", "%q is invalid: not a directory", c.RequestBufferDir)
		}
	}
	return nil
}

// limits are one listener's request limits (Config with defaults), as
// the guard applies them.
type limits struct {
	maxURI         int           // bytes of the request target
	maxLine        int           // bytes of one header line, "Name: value"
	maxHeaders     int           // header lines
	maxHeaderBytes int           // bytes of the request line and header block
	buffering      bool          // read the body before admission
	bufMem         int64         // body bytes kept in memory; more go to a file
	maxBody        int64         // largest body, bytes; 0 no limit
	bodyTimeout    time.Duration // longest wait for body bytes; 0 none
	bodyRate       float64       // minimum body transfer rate, bytes/s; 0 none
	readTimeout    time.Duration // read_timeout: the whole request; 0 none
	tmpDir         string
}

func limitsOf(c *Config) limits {
	return limits{maxURI: c.MaxURIBytes, maxLine: c.MaxHeaderLineBytes, maxHeaders: c.MaxHeaders, maxHeaderBytes: c.MaxHeaderBytes,
		buffering: c.RequestBuffering == nil || *c.RequestBuffering, bufMem: c.RequestBufferBytes,
		maxBody: c.MaxRequestBodyBytes, bodyTimeout: c.ReadBodyTimeout, bodyRate: c.ReadBodyMinRate,
		readTimeout: c.ReadTimeout, tmpDir: c.RequestBufferDir}
}
