// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SummaryFile is the name of the summary in a result folder.
const SummaryFile = "summary.json"

// Bundle is everything one run writes to its result folder: the summary,
// named CSV tables and named PNG figures, written in the order they were
// added.
type Bundle struct {
	Summary *Summary
	tables  []named[*Table]
	figures []named[*Figure]
}

type named[T any] struct {
	name string
	v    T
}

// NewBundle returns a bundle around s.
func NewBundle(s *Summary) *Bundle { return &Bundle{Summary: s} }

// AddTable adds a table written as name, which must be a plain file name
// ending in .csv ("timeseries.csv"). A second table of the same name
// replaces the first.
func (b *Bundle) AddTable(name string, t *Table) {
	b.tables = set(b.tables, name, t)
}

// AddFigure adds a figure written as name, a plain file name ending in
// .png.
func (b *Bundle) AddFigure(name string, f *Figure) {
	b.figures = set(b.figures, name, f)
}

func set[T any](list []named[T], name string, v T) []named[T] {
	for i := range list {
		if list[i].name == name {
			list[i].v = v
			return list
		}
	}
	return append(list, named[T]{name, v})
}

// Table returns the named table, or nil.
func (b *Bundle) Table(name string) *Table {
	for _, t := range b.tables {
		if t.name == name {
			return t.v
		}
	}
	return nil
}

// Figure returns the named figure, or nil.
func (b *Bundle) Figure(name string) *Figure {
	for _, f := range b.figures {
		if f.name == name {
			return f.v
		}
	}
	return nil
}

// Files returns the file names the bundle writes, summary first.
func (b *Bundle) Files() []string {
	out := []string{SummaryFile}
	for _, t := range b.tables {
		out = append(out, t.name)
	}
	for _, f := range b.figures {
		out = append(out, f.name)
	}
	return out
}

func checkName(name, ext string) error {
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ext) {
		return fmt.Errorf("report: file name %q must be a plain name ending in %s", name, ext)
	}
	return nil
}

// Validate checks the summary, the file names and the figures without
// writing anything.
func (b *Bundle) Validate() error {
	if b.Summary == nil {
		return fmt.Errorf("report: bundle has no summary")
	}
	if err := b.Summary.Validate(); err != nil {
		return err
	}
	for _, t := range b.tables {
		if err := checkName(t.name, ".csv"); err != nil {
			return err
		}
	}
	for _, f := range b.figures {
		if err := checkName(f.name, ".png"); err != nil {
			return err
		}
		if err := f.v.Validate(); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// Write creates dir (and its parents) and writes every file of the bundle
// into it, replacing files of the same names. It returns the paths
// written.
func (b *Bundle) Write(dir string) ([]string, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var paths []string
	p := filepath.Join(dir, SummaryFile)
	if err := b.Summary.WriteFile(p); err != nil {
		return paths, err
	}
	paths = append(paths, p)
	for _, t := range b.tables {
		p := filepath.Join(dir, t.name)
		if err := t.v.WriteFile(p); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	for _, f := range b.figures {
		p := filepath.Join(dir, f.name)
		if err := f.v.WriteFile(p); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}
