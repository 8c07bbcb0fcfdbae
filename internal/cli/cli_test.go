// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// runCLI runs the command line in-process and returns its exit status and
// output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRootHelpListsCommands(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {}} {
		code, out, errOut := runCLI(t, args...)
		if code != 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
		if !strings.Contains(out, "Available Commands:") || !strings.Contains(out, "\n  design ") {
			t.Errorf("%q: help does not list design:\n%s", args, out)
		}
	}
}

func TestRootUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"nosuchcommand"}, `unknown command "nosuchcommand"`},
		{[]string{"--nosuchflag"}, "unknown flag: --nosuchflag"},
		{[]string{"-Z"}, "unknown shorthand flag: 'Z'"},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(t, c.args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2", c.args, code)
		}
		if !strings.HasPrefix(errOut, "sluice: ") || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: stderr %q, want it to contain %q", c.args, errOut, c.want)
		}
		if out != "" {
			t.Errorf("%q: unexpected stdout %q", c.args, out)
		}
	}
}

func TestExitCode(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"usage", usagef("bad --x %d", 3), 2},
		{"wrapped usage", fmt.Errorf("config: %w", usagef("bad")), 2},
		{"runtime", errors.New("disk full"), 1},
	}
	for _, c := range cases {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("%s: exitCode = %d, want %d", c.name, got, c.want)
		}
	}
	if msg := usagef("bad --x %d", 3).Error(); msg != "bad --x 3" {
		t.Errorf("usagef message %q", msg)
	}
	inner := errors.New("inner")
	if !errors.Is(usageError{inner}, inner) {
		t.Error("usageError does not unwrap")
	}
}

func TestIsCobraUsage(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want bool
	}{
		{`unknown command "x" for "sluice"`, true},
		{"accepts 0 arg(s), received 1", true},
		{"connection refused", false},
	} {
		if got := isCobraUsage(errors.New(c.msg)); got != c.want {
			t.Errorf("isCobraUsage(%q) = %v, want %v", c.msg, got, c.want)
		}
	}
}

// failWriter fails every write, to exercise the runtime-failure exit path.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("write failed") }

func TestRuntimeFailureExitsOne(t *testing.T) {
	for _, args := range [][]string{
		{"design", "yaksha", "--tref", "150ms", "--lambda0", "50"},
		{"design", "kihl", "--sigma", "44.4", "--K", "20", "--Ti", "2.8", "--json"},
	} {
		var errOut bytes.Buffer
		if code := run(args, failWriter{}, &errOut); code != 1 {
			t.Errorf("%q: exit %d, want 1 (stderr %q)", args, code, errOut.String())
		}
		if !strings.Contains(errOut.String(), "write failed") {
			t.Errorf("%q: stderr %q does not report the write error", args, errOut.String())
		}
	}
}

// A lab command typed by habit says where it went, exits 2 and prints
// nothing on stdout, whatever flags follow it.
func TestMovedCommandsSayWhere(t *testing.T) {
	for _, name := range LabCommands {
		code, out, errOut := runCLI(t, name, "--seed", "2", "x")
		if code != 2 || out != "" {
			t.Errorf("%s: exit %d stdout %q, want 2 and nothing", name, code, out)
		}
		for _, want := range []string{`"` + name + `" moved to the lab's binary`, "sluice-lab " + name, "go run ./cmd/sluice-lab " + name} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%s: stderr %q does not contain %q", name, errOut, want)
			}
		}
	}
	// They stay out of the help: the product's commands are listed.
	_, out, _ := runCLI(t, "--help")
	for _, name := range LabCommands {
		if strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("help lists the moved command %s:\n%s", name, out)
		}
	}
	for _, name := range []string{"proxy", "validate", "design", "version"} {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("help does not list %s:\n%s", name, out)
		}
	}
}
