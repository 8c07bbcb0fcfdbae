// SPDX-License-Identifier: Apache-2.0

// Package report writes the result folder of a sluice run: summary.json
// (a flat object of named metrics), time series as CSV tables, and PNG
// plots drawn with gonum.org/v1/plot. The simulator (`sluice-lab sim`) and the
// live experiments share it, so nothing here knows about a particular
// scenario.
//
// Everything is deterministic: the same Summary, Table and Figure values
// always produce the same bytes, so two runs with the same seed yield
// byte-identical folders. Values of this package are not safe for
// concurrent mutation; build them on one goroutine.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
)

// Reserved keys of summary.json that are not metrics.
const (
	KeyScenario = "scenario"
	KeyMode     = "mode"
	KeySeed     = "seed"
)

var metricName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Summary is the content of summary.json: the scenario (or experiment)
// name, the mode ("sim" or "live"), the seed, and a flat set of numeric
// metrics whose names are snake_case with their unit in the name
// (p90_ms, goodput_rps, reject_fraction, utilization_mean).
//
// The zero value is an empty summary ready to use.
type Summary struct {
	Scenario string
	Mode     string
	Seed     uint64
	metrics  map[string]float64
}

// NewSummary returns an empty summary for the given run.
func NewSummary(scenario, mode string, seed uint64) *Summary {
	return &Summary{Scenario: scenario, Mode: mode, Seed: seed}
}

// Set records metric name = v, replacing an earlier value. Names are
// checked when the summary is encoded (see MarshalJSON). NaN and ±Inf are
// kept and written as JSON null.
func (s *Summary) Set(name string, v float64) {
	if s.metrics == nil {
		s.metrics = make(map[string]float64)
	}
	s.metrics[name] = v
}

// Get returns the metric's value and whether it is set.
func (s *Summary) Get(name string) (float64, bool) {
	v, ok := s.metrics[name]
	return v, ok
}

// Metric returns the metric's value, or NaN when it is not set.
func (s *Summary) Metric(name string) float64 {
	if v, ok := s.metrics[name]; ok {
		return v
	}
	return math.NaN()
}

// Names returns the metric names in sorted order.
func (s *Summary) Names() []string {
	names := make([]string, 0, len(s.metrics))
	for k := range s.metrics {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Validate reports the first metric whose name is not snake_case
// (^[a-z][a-z0-9_]*$) or collides with a reserved key.
func (s *Summary) Validate() error {
	for _, k := range s.Names() {
		if !metricName.MatchString(k) {
			return fmt.Errorf("report: metric name %q is not snake_case (want ^[a-z][a-z0-9_]*$)", k)
		}
		if k == KeyScenario || k == KeyMode || k == KeySeed {
			return fmt.Errorf("report: metric name %q is reserved", k)
		}
	}
	return nil
}

// MarshalJSON encodes the summary as one flat JSON object: scenario, mode
// and seed first, then the metrics in sorted order, one key per line.
// Non-finite values are written as null.
func (s *Summary) MarshalJSON() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	str := func(v string) []byte { q, _ := json.Marshal(v); return q }
	b.WriteString("{\n")
	fmt.Fprintf(&b, "  %q: %s,\n  %q: %s,\n  %q: %d", KeyScenario, str(s.Scenario), KeyMode, str(s.Mode), KeySeed, s.Seed)
	for _, k := range s.Names() {
		fmt.Fprintf(&b, ",\n  %q: %s", k, FormatNumber(s.metrics[k]))
	}
	b.WriteString("\n}")
	return b.Bytes(), nil
}

// FormatNumber renders a metric for JSON: the shortest decimal that reads
// back exactly, or null for NaN and ±Inf.
func FormatNumber(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "null"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// UnmarshalJSON decodes a summary written by MarshalJSON (or any flat
// object with string scenario and mode, an integer seed, and numeric or
// null metrics; null reads back as NaN).
func (s *Summary) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("report: summary: %w", err)
	}
	*s = Summary{}
	for k, v := range raw {
		var err error
		switch k {
		case KeyScenario:
			err = json.Unmarshal(v, &s.Scenario)
		case KeyMode:
			err = json.Unmarshal(v, &s.Mode)
		case KeySeed:
			err = json.Unmarshal(v, &s.Seed)
		default:
			if string(v) == "null" {
				s.Set(k, math.NaN())
				continue
			}
			var f float64
			err = json.Unmarshal(v, &f)
			s.Set(k, f)
		}
		if err != nil {
			return fmt.Errorf("report: summary key %q: %w", k, err)
		}
	}
	return nil
}

// WriteFile writes the summary as JSON (with a trailing newline) to path.
func (s *Summary) WriteFile(path string) error {
	data, err := s.MarshalJSON()
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadSummary reads a summary.json file.
func ReadSummary(path string) (*Summary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := new(Summary)
	if err := s.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
