// SPDX-License-Identifier: Apache-2.0

package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"time"
)

// Table is a time series (or any tabular result) with named columns, written
// as CSV. Cells are stored as text, formatted on Append, so the file is the
// same on every run.
//
// The zero value has no columns; use NewTable.
type Table struct {
	columns []string
	rows    [][]string
}

// NewTable returns an empty table with the given column names. Column names
// should carry their unit (time_s, mean_rt_ms, rate_rps).
func NewTable(columns ...string) *Table {
	return &Table{columns: slices.Clone(columns)}
}

// Columns returns the column names.
func (t *Table) Columns() []string { return slices.Clone(t.columns) }

// Len returns the number of rows.
func (t *Table) Len() int { return len(t.rows) }

// Append adds one row. It needs exactly one value per column; supported
// types are float64 (6 significant digits, NaN as "NaN"), float32, int,
// int64, uint64, bool, string and time.Duration (written in seconds).
func (t *Table) Append(values ...any) error {
	if len(values) != len(t.columns) {
		return fmt.Errorf("report: row of %d values for %d columns", len(values), len(t.columns))
	}
	row := make([]string, len(values))
	for i, v := range values {
		s, err := formatCell(v)
		if err != nil {
			return fmt.Errorf("report: column %q: %w", t.columns[i], err)
		}
		row[i] = s
	}
	t.rows = append(t.rows, row)
	return nil
}

// FormatFloat renders a table cell: 6 significant digits, NaN as "NaN",
// ±Inf as "+Inf"/"-Inf".
func FormatFloat(x float64) string {
	return strconv.FormatFloat(x, 'g', 6, 64)
}

func formatCell(v any) (string, error) {
	switch x := v.(type) {
	case float64:
		return FormatFloat(x), nil
	case float32:
		return FormatFloat(float64(x)), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case bool:
		return strconv.FormatBool(x), nil
	case string:
		return x, nil
	case time.Duration:
		return FormatFloat(x.Seconds()), nil
	}
	return "", fmt.Errorf("unsupported cell type %T", v)
}

// Cell returns the text of row i, column name.
func (t *Table) Cell(i int, name string) (string, error) {
	j := slices.Index(t.columns, name)
	if j < 0 {
		return "", fmt.Errorf("report: no column %q (have %v)", name, t.columns)
	}
	if i < 0 || i >= len(t.rows) {
		return "", fmt.Errorf("report: row %d out of range [0, %d)", i, len(t.rows))
	}
	return t.rows[i][j], nil
}

// Floats returns a column parsed as numbers ("NaN" reads as NaN). A cell
// that is not a number is an error naming its row.
func (t *Table) Floats(name string) ([]float64, error) {
	j := slices.Index(t.columns, name)
	if j < 0 {
		return nil, fmt.Errorf("report: no column %q (have %v)", name, t.columns)
	}
	out := make([]float64, len(t.rows))
	for i, r := range t.rows {
		f, err := strconv.ParseFloat(r[j], 64)
		if err != nil {
			return nil, fmt.Errorf("report: column %q row %d: %q is not a number", name, i, r[j])
		}
		out[i] = f
	}
	return out, nil
}

// Filter returns the rows whose column name equals value, as a new table
// with the same columns.
func (t *Table) Filter(name, value string) (*Table, error) {
	j := slices.Index(t.columns, name)
	if j < 0 {
		return nil, fmt.Errorf("report: no column %q (have %v)", name, t.columns)
	}
	out := NewTable(t.columns...)
	for _, r := range t.rows {
		if r[j] == value {
			out.rows = append(out.rows, r)
		}
	}
	return out, nil
}

// WriteCSV writes the header and the rows as CSV.
func (t *Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.columns); err != nil {
		return err
	}
	if err := cw.WriteAll(t.rows); err != nil {
		return err
	}
	return cw.Error()
}

// WriteFile writes the table as CSV to path.
func (t *Table) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := t.WriteCSV(f); err != nil {
		f.Close()
		return fmt.Errorf("report: writing %s: %w", path, err)
	}
	return f.Close()
}

// ReadCSV reads a table written by WriteCSV.
func ReadCSV(r io.Reader) (*Table, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("report: empty CSV (no header)")
	}
	return &Table{columns: recs[0], rows: recs[1:]}, nil
}

// Mean returns the mean of the finite values of xs, or NaN if there are
// none.
func Mean(xs []float64) float64 {
	s, n := 0.0, 0
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			s += x
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return s / float64(n)
}

// Std returns the population standard deviation of the finite values of
// xs, or NaN if there are none.
func Std(xs []float64) float64 {
	m := Mean(xs)
	if math.IsNaN(m) {
		return m
	}
	s, n := 0.0, 0
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			s += (x - m) * (x - m)
			n++
		}
	}
	return math.Sqrt(s / float64(n))
}

// ECDF returns the empirical distribution function of the finite values
// of xs as sorted x values and y = i/n, the fraction of values ≤ x.
func ECDF(xs []float64) (x, y []float64) {
	for _, v := range xs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			x = append(x, v)
		}
	}
	slices.Sort(x)
	y = make([]float64, len(x))
	for i := range x {
		y[i] = float64(i+1) / float64(len(x))
	}
	return x, y
}

// SettleTime returns how many bins after bin from it takes until the
// series, averaged over win bins, is within ±tol (a fraction) of its
// steady value, the mean of its last tail bins; NaN when it never is.
// Averaging over a window keeps the counting noise of one bin from hiding
// a settled series.
func SettleTime(bins []float64, from, win, tail int, tol float64) float64 {
	if from < 0 || win < 1 || tail < 1 || len(bins)-tail <= from {
		return math.NaN()
	}
	steady := Mean(bins[len(bins)-tail:])
	for i := from; i+win <= len(bins); i++ {
		if math.Abs(Mean(bins[i:i+win])-steady) <= tol*steady {
			return float64(i - from)
		}
	}
	return math.NaN()
}
