// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"cmp"
	"fmt"
	"os"
	"strings"

	"github.com/sluicehq/sluice/internal/fielderr"
)

// The defaults of Config, in bytes.
const (
	DefaultMemoryBytes           = 1 << 20 // one response in memory
	DefaultMaxMemoryBytes        = 64 << 20
	DefaultMaxFileBytes          = 1 << 30 // nginx's proxy_max_temp_file_size 1024m
	DefaultMaxDiskBytes          = 4 << 30
	DefaultConnectionMemoryBytes = 48 << 10 // one client connection's own memory
)

// Config is the proxy's response_buffering section: each
// response is read from its backend as fast as the backend sends it,
// into memory up to MemoryBytes and then into a temporary file, while
// the proxy writes it to the client at the client's pace. The backend's
// connection, its pool slot, the stage's concurrency and the response's
// response-time sample are released when the backend has sent the last
// byte, not when the client has read it. Streams are never buffered:
// upgrades, server-sent events, gRPC, responses that become long-lived
// (the stage's long_lived), responses whose backend sends
// "X-Accel-Buffering: no", and those the Exclude lists name. When no
// memory and no disk is left within the caps, a response falls back to
// pass-through with back-pressure (the backend waits for the client), as
// without buffering; nothing is refused because of buffering.
type Config struct {
	// Enabled buffers responses (default true; nginx's proxy_buffering
	// on). false passes every response through.
	Enabled *bool `yaml:"enabled"`
	// MemoryBytes is the most of one response held in memory at a time,
	// in bytes (default 1 MiB); the rest goes to its temporary file.
	// Memory is taken in chunks of 32 KiB and given back as the client
	// reads.
	MemoryBytes int64 `yaml:"memory_bytes"`
	// MaxMemoryBytes bounds the memory of all responses' buffers
	// together, in bytes (default 64 MiB): the chunks responses hold,
	// the 32 KiB copy buffers writing them to their clients, the chunks
	// kept for reuse, and first the open connections' own memory
	// (ConnectionMemoryBytes each).
	MaxMemoryBytes int64 `yaml:"max_memory_bytes"`
	// TempDir is the directory of the temporary files (default: the
	// system's temporary directory, $TMPDIR or /tmp; nginx's
	// proxy_temp_path). Each file is named sluice-resp-PID-*, unlinked
	// as soon as it is created and closed when its response ends; at
	// start the files of processes no longer running are removed.
	TempDir string `yaml:"temp_dir,omitempty"`
	// MaxFileBytes bounds one response's temporary file, in bytes
	// (default 1 GiB, nginx's proxy_max_temp_file_size; -1: no
	// temporary files, memory only).
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxDiskBytes bounds all temporary files together, in bytes
	// (default 4 GiB). If the temporary directory is a tmpfs (as /tmp is
	// on some systems), these bytes are memory.
	MaxDiskBytes int64 `yaml:"max_disk_bytes"`
	// ConnectionMemoryBytes is the memory each open client connection
	// costs the proxy whatever it sends, in bytes (default 48 KiB: two
	// goroutine stacks of net/http, about 20 KiB together, its read and
	// write buffers, a 4 KiB copy buffer and the request's state, 27 KiB
	// of heap, measured with 1,000 slow readers in docs/reliability.md);
	// -1: not counted. The response buffers get MaxMemoryBytes less open
	// connections × ConnectionMemoryBytes, so that the proxy's memory
	// stays within its baseline plus MaxMemoryBytes however many clients
	// read slowly; when connections take it all, responses are buffered
	// in their temporary files only.
	ConnectionMemoryBytes int64 `yaml:"connection_memory_bytes"`
	// SoftMemoryLimitBytes is the Go runtime's soft memory limit
	// (runtime/debug.SetMemoryLimit), in bytes: the garbage collector
	// runs more often as the process nears it, instead of letting the
	// heap grow to twice its live size (GOGC=100). 0 (the default): 8
	// MiB plus the larger of MaxMemoryBytes and open connections ×
	// ConnectionMemoryBytes, followed as connections come and go; -1:
	// none; else at least MaxMemoryBytes. Never set when the environment
	// sets GOMEMLIMIT (off included), nor when Enabled is false; the
	// process's limit is put back when the proxy stops.
	SoftMemoryLimitBytes int64 `yaml:"soft_memory_limit_bytes"`
	// ExcludePaths are request path prefixes whose responses are never
	// buffered (default none).
	ExcludePaths []string `yaml:"exclude_paths,omitempty"`
	// ExcludeContentTypes are Content-Type prefixes, compared without
	// regard to case, of responses never buffered, e.g. "video/" (default
	// none).
	ExcludeContentTypes []string `yaml:"exclude_content_types,omitempty"`
}

// SetDefaults fills the documented defaults of every unset field.
func (b *Config) SetDefaults() {
	if b.Enabled == nil {
		t := true
		b.Enabled = &t
	}
	b.MemoryBytes = cmp.Or(b.MemoryBytes, DefaultMemoryBytes)
	b.MaxMemoryBytes = cmp.Or(b.MaxMemoryBytes, DefaultMaxMemoryBytes)
	b.MaxFileBytes = cmp.Or(b.MaxFileBytes, DefaultMaxFileBytes)
	b.MaxDiskBytes = cmp.Or(b.MaxDiskBytes, DefaultMaxDiskBytes)
	b.ConnectionMemoryBytes = cmp.Or(b.ConnectionMemoryBytes, DefaultConnectionMemoryBytes)
}

// Validate checks b (with its defaults set); an error is a FieldError
// whose path starts with response_buffering.
func (b *Config) Validate() error {
	const p = "response_buffering."
	if b.MemoryBytes < bufChunk {
		return fielderr.Errorf(p+"memory_bytes", "%d is invalid: must be at least %d (one chunk of 32 KiB)", b.MemoryBytes, bufChunk)
	}
	if b.MaxMemoryBytes < b.MemoryBytes {
		return fielderr.Errorf(p+"max_memory_bytes", "%d is invalid: must be at least memory_bytes (%d)", b.MaxMemoryBytes, b.MemoryBytes)
	}
	if b.MaxFileBytes < -1 {
		return fielderr.Errorf(p+"max_file_bytes", "%d is invalid: must be > 0, or -1 for no temporary files", b.MaxFileBytes)
	}
	if b.MaxDiskBytes < 0 {
		return fielderr.Errorf(p+"max_disk_bytes", "%d is invalid: must be > 0", b.MaxDiskBytes)
	}
	if b.ConnectionMemoryBytes < -1 {
		return fielderr.Errorf(p+"connection_memory_bytes", "%d is invalid: must be > 0, or -1 for not counted", b.ConnectionMemoryBytes)
	}
	if b.SoftMemoryLimitBytes < -1 || b.SoftMemoryLimitBytes > 0 && b.SoftMemoryLimitBytes < b.MaxMemoryBytes {
		return fielderr.Errorf(p+"soft_memory_limit_bytes", "%d is invalid: must be at least max_memory_bytes (%d), 0 for automatic, or -1 for none", b.SoftMemoryLimitBytes, b.MaxMemoryBytes)
	}
	if b.TempDir != "" {
		if fi, err := os.Stat(b.TempDir); err != nil || !fi.IsDir() {
			return fielderr.Errorf(p+"temp_dir", "%q is invalid: not a directory", b.TempDir)
		}
	}
	for i, x := range b.ExcludePaths {
		if !strings.HasPrefix(x, "/") {
			return fielderr.Errorf(fmt.Sprintf("%sexclude_paths[%d]", p, i), "%q is invalid: must be a path prefix starting with /", x)
		}
	}
	for i, x := range b.ExcludeContentTypes {
		if strings.TrimSpace(x) == "" {
			return fielderr.Errorf(fmt.Sprintf("%sexclude_content_types[%d]", p, i), "%q is invalid: must be a Content-Type prefix such as video/", x)
		}
	}
	return nil
}
