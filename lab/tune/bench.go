// SPDX-License-Identifier: Apache-2.0

package tune

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/lab/report"
)

// String formats p as "k=v k=v", keys sorted ("" for an empty point).
func (p Point) String() string {
	ks := make([]string, 0, len(p))
	for k := range p {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for i, k := range ks {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", k, report.FormatFloat(p[k]))
	}
	return b.String()
}

// Bench is what the lab's tuning commands share: their flags, the
// best.csv they fill (one row per scenario and row: its parameters, its
// score, the storm's goodput and the chosen metrics) and the search of
// one peer in one scenario, whose table goes beside it.
type Bench struct {
	// Out is the folder of the tables (-out, required).
	Out string
	// Seeds are the seeds each point is scored over (-seeds n: 1…n).
	Seeds []uint64
	// Options are the search's (-refine, -parallel).
	Options Options
	// Set holds the more parameters of -set (comma-separated there), as
	// sluice-lab sim --set takes them; nil without -set.
	Set []string

	nseeds  int
	set     string
	metrics []string
	best    *report.Table
}

// StormMetric is the metric of the storm's goodput that best.csv shows
// beside each row's score.
const StormMetric = "storm_goodput_rps"

// Flags declares the shared flags on fs: -out, -seeds (default 2),
// -refine (default refine), -parallel (default 2) and -set, whose help
// text is setHelp.
func (b *Bench) Flags(fs *flag.FlagSet, refine int, setHelp string) {
	fs.StringVar(&b.Out, "out", "", "directory for the tables (required)")
	fs.IntVar(&b.nseeds, "seeds", 2, "seeds per point (1…n)")
	fs.IntVar(&b.Options.Refine, "refine", refine, "pattern-search passes after the grid")
	fs.IntVar(&b.Options.Parallel, "parallel", 2, "points evaluated at once")
	fs.StringVar(&b.set, "set", "", setHelp)
}

// Start checks the shared flags once fs has parsed them, creates Out and
// begins best.csv with the metrics reported beside each row's score.
func (b *Bench) Start(fs *flag.FlagSet, metrics []string) error {
	if b.Out == "" || b.nseeds < 1 {
		fs.Usage()
		return errors.New("-out is required and -seeds must be ≥ 1")
	}
	if err := os.MkdirAll(b.Out, 0o755); err != nil {
		return err
	}
	b.Seeds = make([]uint64, b.nseeds)
	for i := range b.Seeds {
		b.Seeds[i] = uint64(i + 1)
	}
	if b.set != "" {
		b.Set = strings.Split(b.set, ",")
	}
	b.metrics = metrics
	b.best = report.NewTable(append([]string{"scenario", "row", "params", "score", StormMetric}, metrics...)...)
	return nil
}

// Add appends a row to best.csv; a metric m lacks is left empty.
func (b *Bench) Add(scn, row, params string, score float64, m map[string]float64) error {
	vals := []any{scn, row, params, score, m[StormMetric]}
	for _, k := range b.metrics {
		v, ok := m[k]
		if !ok {
			vals = append(vals, "")
			continue
		}
		vals = append(vals, v)
	}
	return b.best.Append(vals...)
}

// Tune searches peer's space in scenario scn with obj, writes the search's
// table to Out/<scn>-<peer>.csv, adds the best point as the row
// "<peer> (tuned)", says on stderr how it went, and returns it.
func (b *Bench) Tune(scn, peer string, space []Dim, obj Objective) (Point, error) {
	r, err := Search(space, obj, b.Options)
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", peer, scn, err)
	}
	tab, err := r.Table()
	if err != nil {
		return nil, err
	}
	if err := tab.WriteFile(filepath.Join(b.Out, scn+"-"+peer+".csv")); err != nil {
		return nil, err
	}
	if err := b.Add(scn, peer+" (tuned)", r.Best.Point.String(), r.Best.Score, r.Best.Metrics); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "%s %s: %d points, best %.2f at %s\n", scn, peer, len(r.Evals), r.Best.Score, r.Best.Point)
	return r.Best.Point, nil
}

// Finish writes Out/best.csv and prints it to w.
func (b *Bench) Finish(w io.Writer) error {
	if err := b.best.WriteFile(filepath.Join(b.Out, "best.csv")); err != nil {
		return err
	}
	return b.best.WriteCSV(w)
}
