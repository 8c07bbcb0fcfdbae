// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/figure/record"
)

// defaultResults is the folder of the committed records, relative to the
// repository's root (where the lab's commands are run from).
const defaultResults = "lab/results"

// resultsFlags holds the flags of `sluice-lab results`.
type resultsFlags struct {
	dir   string
	doc   string
	write bool
	check bool
}

// newResultsCmd builds `sluice-lab results`.
func newResultsCmd() *cobra.Command {
	var f resultsFlags
	cmd := &cobra.Command{
		Use:   "results",
		Short: "Print the table of every figure's current run, from the committed records",
		Long: `results prints one markdown table of every live and simulated figure:
whether its current run met the paper's expectations (how many of them),
when it ran, the machine's load when it started, the build, and the
command that reproduces it, with the missed expectations listed below.

It reads the records the runs wrote with --record (` + "`sluice-lab experiment NAME --record`" + `,
` + "`sluice-lab sim NAME --record`" + `): one file per figure and mode,
` + defaultResults + `/FIGURE/MODE.json, committed, replaced by the next recorded run.

  --write   replace the table between the markers of --doc
  --check   exit 1 unless the table in --doc is what the records generate

Run it from the repository's root.`,
		Example: `  sluice-lab results
  sluice-lab experiment seda-spike --record && sluice-lab results --write
  sluice-lab results --check`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.write && f.check {
				return cli.Usagef("results: --write and --check: give one")
			}
			base, err := relPath(filepath.Dir(f.doc), f.dir)
			if err != nil {
				return cli.Usagef("results: --dir %q relative to --doc %q: %v", f.dir, f.doc, err)
			}
			base = filepath.ToSlash(base)
			if f.check || f.write {
				data, err := os.ReadFile(f.doc)
				if err != nil {
					return err
				}
				if f.check {
					return record.Verify(string(data), f.dir, base, filepath.Dir(f.doc))
				}
				recs, err := record.ReadAll(f.dir)
				if err != nil {
					return err
				}
				doc, err := record.Splice(string(data), record.Table(recs, base))
				if err != nil {
					return fmt.Errorf("%s: %w", f.doc, err)
				}
				return os.WriteFile(f.doc, []byte(doc), 0o644)
			}
			recs, err := record.ReadAll(f.dir)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), record.Table(recs, base))
			return err
		},
	}
	cmd.Flags().StringVar(&f.dir, "dir", defaultResults, "folder of the records (FIGURE/MODE.json)")
	cmd.Flags().StringVar(&f.doc, "doc", "docs/experiments.md", "document whose table --write replaces and --check verifies; the table's links are relative to it")
	cmd.Flags().BoolVar(&f.write, "write", false, "replace the table between the markers of --doc")
	cmd.Flags().BoolVar(&f.check, "check", false, "fail unless the table in --doc is what the records generate")
	return cmd
}

// addRecordFlag adds --record to a run command: with no value it names
// the committed records' folder.
func addRecordFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "record", "", "also write the run's record (expectations met, date, load at start, build, command) to DIR/NAME/MODE.json (--record=DIR); --record alone writes to "+defaultResults+", the committed records that `sluice-lab results` tabulates")
	cmd.Flags().Lookup("record").NoOptDefVal = defaultResults
}

// writeRecord completes r, started before the run (New reads the load at
// start), with the run's command, wall time and checks, and writes it
// under dir when --record was given.
func writeRecord(cmd *cobra.Command, dir string, r *record.Record, checks []figure.Check) error {
	if dir == "" {
		return nil
	}
	r.Command = commandLine(cmd, r.Figure)
	r.WallTimeS = time.Since(r.Started).Round(time.Second).Seconds()
	r.SetChecks(checks)
	p, err := r.Write(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "record: %s\n", p)
	return nil
}

// commandLine is the command that reproduces a run: the command's path,
// the figure's name and every flag set on the command line except where
// the output goes (--out, --record).
func commandLine(cmd *cobra.Command, name string) string {
	parts := []string{cmd.CommandPath(), name}
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		switch fl.Name {
		case "out", "record":
			return
		}
		if fl.Value.Type() == "bool" {
			if fl.Value.String() == "true" {
				parts = append(parts, "--"+fl.Name)
			} else {
				parts = append(parts, "--"+fl.Name+"=false")
			}
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			if fl.Value.Type() == "stringArray" {
				for _, v := range sv.GetSlice() {
					parts = append(parts, "--"+fl.Name, shellQuote(v))
				}
				return
			}
			parts = append(parts, "--"+fl.Name, shellQuote(strings.Join(sv.GetSlice(), ",")))
			return
		}
		parts = append(parts, "--"+fl.Name, shellQuote(fl.Value.String()))
	})
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and -_.,=:/+.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,=:/+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// relPath is target's path relative to the folder base, either of them
// relative to the working directory or absolute.
func relPath(base, target string) (string, error) {
	b, err := filepath.Abs(base)
	if err != nil {
		return "", err
	}
	t, err := filepath.Abs(target)
	if err != nil {
		return "", err
	}
	return filepath.Rel(b, t)
}
