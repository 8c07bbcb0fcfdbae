// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testconf"
)

func TestValidateExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("examples: %v %v", files, err)
	}
	code, out, errOut := runCLI(t, append([]string{"validate"}, files...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for _, f := range files {
		if !strings.Contains(out, f+": ok") {
			t.Errorf("no ok line for %s:\n%s", f, out)
		}
	}
}

func TestValidateReportsFileLineField(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "proxy.yaml")
	text := testconf.BadStageTarget
	if err := os.WriteFile(bad, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(strings.Replace(text, "-1s", "1s", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "validate", good, bad)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if want := bad + ":14: stages[1].params.target: -1s is invalid"; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q lacks %q", errOut, want)
	}
	if !strings.Contains(out, good+": ok") {
		t.Errorf("stdout %q lacks the good file", out)
	}
	if code, _, errOut := runCLI(t, "validate"); code != 2 || !strings.Contains(errOut, "requires at least 1 arg") {
		t.Errorf("no args: exit %d %q", code, errOut)
	}
}
