// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"strings"
	"testing"
)

// runCLI runs the lab's command line in-process and returns its exit
// status and output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// wantUsageError runs the command line args and wants the exit status of
// bad usage or configuration (2), every one of want in stderr and nothing
// on stdout.
func wantUsageError(t *testing.T, args []string, want ...string) {
	t.Helper()
	code, out, errOut := runCLI(t, args...)
	if code != 2 {
		t.Errorf("%q: exit %d, want 2 (stderr %q)", args, code, errOut)
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Errorf("%q: stderr %q, want it to contain %q", args, errOut, w)
		}
	}
	if out != "" {
		t.Errorf("%q: unexpected stdout %q", args, out)
	}
}

func TestRootHelpListsLabCommands(t *testing.T) {
	code, out, errOut := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, name := range []string{"demo", "experiment", "sim", "testbed", "load"} {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("help does not list %s:\n%s", name, out)
		}
	}
	// The proxy is there for child processes, not advertised.
	if strings.Contains(out, "\n  proxy ") {
		t.Errorf("help lists the hidden proxy command:\n%s", out)
	}
	if code, _, errOut := runCLI(t, "proxy", "--help"); code != 0 {
		t.Errorf("proxy --help: exit %d, stderr %q", code, errOut)
	}
}

func TestRootUsageErrors(t *testing.T) {
	code, out, errOut := runCLI(t, "nosuchcommand")
	if code != 2 || out != "" || !strings.HasPrefix(errOut, "sluice-lab: ") || !strings.Contains(errOut, `unknown command "nosuchcommand"`) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
