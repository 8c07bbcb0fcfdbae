// SPDX-License-Identifier: Apache-2.0

// Package record keeps the committed record of each figure's current run
// and generates the table of where the project stands from them.
//
// A run of a figure (`sluice-lab experiment NAME --record` or `sluice-lab
// sim NAME --record`) writes one small JSON file, RESULTS/NAME/MODE.json
// (the committed ones are under lab/results): when it ran, the machine's
// load when it started, the build, the command that reproduces it, and
// every expectation with the numbers measured and whether they met it (the
// rows of the run's expectations.csv). A newer run of the same figure and
// mode replaces the file: the records in the tree are the current runs.
//
// Table renders them, one row for every figure and mode the registry of
// package figure knows, as the markdown table docs/experiments.md opens
// with; Splice and Verify put that table into a document between markers
// and verify that it is what the records generate.
package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
)

// Check is one expectation as a run evaluated it: a row of the run's
// expectations.csv.
type Check struct {
	// Claim states the expectation.
	Claim string `json:"claim"`
	// Measured gives the numbers the run measured and the bound.
	Measured string `json:"measured"`
	// Pass reports whether the run met the expectation.
	Pass bool `json:"pass"`
}

// Record is one run of a figure, as committed under the results folder.
type Record struct {
	// Figure is the figure's name in the registry of package figure.
	Figure string `json:"figure"`
	// Mode is "live" or "sim".
	Mode figure.Mode `json:"mode"`
	// Seed is the run's seed.
	Seed uint64 `json:"seed"`
	// Quick reports a live run of the shortened form.
	Quick bool `json:"quick,omitempty"`
	// Started is when the run started, in UTC.
	Started time.Time `json:"started"`
	// Load1 is the 1-minute load average (/proc/loadavg) when the run
	// started; nil when the system does not report it.
	Load1 *float64 `json:"load_1m_at_start"`
	// CPUs is the number of CPUs the run's process could use.
	CPUs int `json:"cpus"`
	// Revision is the build's VCS revision, with "+dirty" when the tree
	// had uncommitted changes; empty when the binary carries none.
	Revision string `json:"revision"`
	// Command reproduces the run (without its output folder), e.g.
	// "sluice-lab experiment seda-spike --quick".
	Command string `json:"command"`
	// WallTimeS is the run's wall-clock time in seconds.
	WallTimeS float64 `json:"wall_time_s"`
	// Checks are the figure's expectations as this run evaluated them.
	Checks []Check `json:"checks"`
}

// New starts the record of a run of the named figure in mode m that
// started at started: the load average now, the CPU count, the build's
// revision.
func New(name string, m figure.Mode, seed uint64, started time.Time) *Record {
	r := &Record{Figure: name, Mode: m, Seed: seed, Started: started.UTC().Truncate(time.Second),
		CPUs: runtime.GOMAXPROCS(0), Revision: BuildRevision()}
	if v, ok := LoadAverage(); ok {
		r.Load1 = &v
	}
	return r
}

// SetChecks records the run's checks.
func (r *Record) SetChecks(cs []figure.Check) {
	r.Checks = make([]Check, len(cs))
	for i, c := range cs {
		r.Checks[i] = Check{Claim: c.Claim, Measured: c.Measured, Pass: c.Pass}
	}
}

// Passed returns the number of checks met and the number of checks.
func (r *Record) Passed() (met, total int) {
	for _, c := range r.Checks {
		if c.Pass {
			met++
		}
	}
	return met, len(r.Checks)
}

// Busy reports a live run that started with the 1-minute load average
// above the CPUs it could use: other work competed for the CPUs its
// backend, proxy and load generator need. Simulated runs, in virtual
// time, are never busy.
func (r *Record) Busy() bool {
	return r.Mode == figure.Live && r.Load1 != nil && *r.Load1 > float64(r.CPUs)
}

// File is the record's path relative to the results folder:
// FIGURE/MODE.json.
func File(name string, m figure.Mode) string {
	return filepath.Join(name, string(m)+".json")
}

// Validate reports a record that names no figure of the registry with a
// driver of its mode, or that has no checks or no start time.
func (r *Record) Validate() error {
	if r.Mode != figure.Live && r.Mode != figure.Sim {
		return fmt.Errorf("mode %q: want %q or %q", r.Mode, figure.Live, figure.Sim)
	}
	if _, err := figure.Lookup(r.Figure, r.Mode); err != nil {
		return fmt.Errorf("figure: %w", err)
	}
	if r.Started.IsZero() {
		return errors.New("started: missing")
	}
	if len(r.Checks) == 0 {
		return errors.New("checks: none")
	}
	if r.Command == "" {
		return errors.New("command: missing")
	}
	return nil
}

// Write validates the record and writes it to root/FIGURE/MODE.json,
// creating the folder; it returns the path written.
func (r *Record) Write(root string) (string, error) {
	if err := r.Validate(); err != nil {
		return "", fmt.Errorf("record %s/%s: %w", r.Figure, r.Mode, err)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, File(r.Figure, r.Mode))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(data, '\n'), 0o644)
}

// Read reads and validates one record; its figure and mode must be the
// ones its path names.
func Read(path string) (*Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	r := new(Record)
	if err := dec.Decode(r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if want := File(r.Figure, r.Mode); !strings.HasSuffix(filepath.ToSlash(path), filepath.ToSlash(want)) {
		return nil, fmt.Errorf("%s: the record of %s (%s) belongs in %s", path, r.Figure, r.Mode, want)
	}
	return r, nil
}

// ReadAll reads every record under root (FIGURE/MODE.json), sorted by
// figure and mode. A file there that is not a valid record is an error,
// so that a stray or misnamed record cannot hide; a missing root holds
// no records.
func ReadAll(root string) ([]*Record, error) {
	var recs []*Record
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		r, err := Read(path)
		if err != nil {
			return err
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(recs, func(a, b *Record) int {
		return strings.Compare(a.Figure+"/"+string(a.Mode), b.Figure+"/"+string(b.Mode))
	})
	return recs, nil
}

// LoadAverage returns the 1-minute load average from /proc/loadavg, and
// false where the system has none.
func LoadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// stampedRevision is the commit the binary was built from when the build
// says so: go build -ldflags "-X
// github.com/sluicehq/sluice/lab/figure/record.stampedRevision=$(git rev-parse HEAD)"
// (the Makefile's lab target does, adding "+dirty" when the tree differs
// from it outside lab/results and docs), for builds without VCS stamping.
var stampedRevision string

// BuildRevision returns the VCS revision the running binary was built
// from (the first 12 hex digits, "+dirty" when the tree was modified):
// the stamped revision, else the build's VCS information. A binary built without VCS stamping (-buildvcs=false, go run) falls back
// to asking git about the working directory's checkout, not counting
// changes under lab/results and docs/experiments.md (the records and the
// table that recording rewrites); "" when neither knows.
func BuildRevision() string {
	if rev, dirty := strings.CutSuffix(stampedRevision, "+dirty"); rev != "" {
		return revision(rev, dirty)
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		var rev string
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			return revision(rev, dirty)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no", "--",
		".", ":(exclude,top)lab/results", ":(exclude,top)docs/experiments.md").Output()
	if err != nil {
		return ""
	}
	return revision(strings.TrimSpace(string(out)), len(bytes.TrimSpace(st)) > 0)
}

func revision(rev string, dirty bool) string {
	rev = rev[:min(len(rev), 12)]
	if dirty {
		rev += "+dirty"
	}
	return rev
}
