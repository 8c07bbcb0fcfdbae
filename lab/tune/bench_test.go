// SPDX-License-Identifier: Apache-2.0

package tune

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A point prints with its keys sorted, the empty point as "".
func TestPointString(t *testing.T) {
	if s := (Point{"y": 0.5, "x": 3}).String(); s != "x=3 y=0.5" {
		t.Fatalf("%q", s)
	}
	if s := (Point{}).String(); s != "" {
		t.Fatalf("%q", s)
	}
}

// A bench parses the shared flags, tunes a peer into its own table and
// best.csv, and leaves a metric a row lacks empty.
func TestBench(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var b Bench
	b.Flags(fs, 3, "more parameters")
	if err := fs.Parse([]string{"-out", dir, "-seeds", "3", "-parallel", "1", "-set", "a=1,b=2"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(fs, []string{"dist"}); err != nil {
		t.Fatal(err)
	}
	if len(b.Seeds) != 3 || b.Seeds[2] != 3 || b.Options.Refine != 3 || strings.Join(b.Set, ";") != "a=1;b=2" {
		t.Fatalf("seeds %v, options %+v, set %q", b.Seeds, b.Options, b.Set)
	}
	if err := b.Add("s", "none", "", 1, map[string]float64{StormMetric: 2}); err != nil {
		t.Fatal(err)
	}
	space := []Dim{{Name: "x", Values: []float64{0, 2, 4}}, {Name: "y", Values: []float64{-1, 0}}}
	best, err := b.Tune("s", "p", space, bowl(2, -1))
	if err != nil {
		t.Fatal(err)
	}
	if best.String() != "x=2 y=-1" {
		t.Fatalf("best %v", best)
	}
	if _, err := os.Stat(filepath.Join(dir, "s-p.csv")); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := b.Finish(&out); err != nil {
		t.Fatal(err)
	}
	want := "scenario,row,params,score,storm_goodput_rps,dist\ns,none,,1,2,\ns,p (tuned),x=2 y=-1,-0,0,0\n" // bowl scores its peak -0
	if out.String() != want {
		t.Fatalf("best.csv:\n%s\nwant\n%s", out.String(), want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "best.csv")); err != nil || string(b) != want {
		t.Fatalf("best.csv file: %v\n%s", err, b)
	}
}

// Without -out, or with no seeds, Start fails before creating anything.
func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"-out", t.TempDir(), "-seeds", "0"}} {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var b Bench
		b.Flags(fs, 1, "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := b.Start(fs, nil); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
