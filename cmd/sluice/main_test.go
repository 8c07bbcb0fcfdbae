// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The test binary doubles as the sluice binary: with SLUICE_TEST_MAIN set
// it runs main, so these tests see the real process's output and exit
// status.
func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_TEST_MAIN") != "" {
		main()
		return
	}
	os.Exit(m.Run())
}

// sluice runs the binary with args and returns its exit status and output.
func sluice(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SLUICE_TEST_MAIN=1")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

func TestBinary(t *testing.T) {
	if code, out, _ := sluice(t, "version"); code != 0 || !strings.HasPrefix(out, "sluice ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
	code, out, _ := sluice(t, "--help")
	if code != 0 {
		t.Errorf("--help: exit %d", code)
	}
	for _, c := range []string{"proxy", "validate", "design", "version"} {
		if !strings.Contains(out, "\n  "+c+" ") {
			t.Errorf("--help does not list %s:\n%s", c, out)
		}
	}
	// A lab command typed by habit: where it went, exit 2.
	if code, _, errOut := sluice(t, "sim", "kihl-step"); code != 2 || !strings.Contains(errOut, "sluice-lab sim") {
		t.Errorf("sim: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := sluice(t, "validate", "/nonexistent.yaml"); code != 2 || !strings.Contains(errOut, "/nonexistent.yaml") {
		t.Errorf("validate of a missing file: exit %d, stderr %q", code, errOut)
	}
}
