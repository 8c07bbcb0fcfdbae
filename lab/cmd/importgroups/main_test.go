// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRegroup(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"mixed", `package p

import (
	"fmt"
	"github.com/sluicehq/sluice"
	"os"
	"github.com/spf13/cobra"
	// why this one
	xs "github.com/sluicehq/sluice/lab/sim"
)
`, `package p

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice"
	// why this one
	xs "github.com/sluicehq/sluice/lab/sim"
)
`},
		{"local before third party", `package p

import (
	"github.com/sluicehq/sluice/proxy"

	"gopkg.in/yaml.v3"
)
`, `package p

import (
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/proxy"
)
`},
		{"clean", "package p\n\nimport (\n\t\"os\"\n\n\t\"github.com/sluicehq/sluice\"\n)\n", ""},
		{"single import", "package p\n\nimport \"os\"\n", ""},
		{"no imports", "package p\n", ""},
	}
	for _, c := range cases {
		out, changed, err := regroup(token.NewFileSet(), c.name+".go", []byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if changed != (c.want != "") {
			t.Errorf("%s: changed %v", c.name, changed)
		}
		if c.want != "" && string(out) != c.want {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, out, c.want)
		}
	}
	if _, _, err := regroup(token.NewFileSet(), "bad.go", []byte("package p\nimport (\n")); err == nil {
		t.Error("a file that does not parse: no error")
	}
}

func TestRunCheckAndFix(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.go")
	src := "package p\n\nimport (\n\t\"github.com/sluicehq/sluice\"\n\t\"os\"\n)\n"
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{dir}, &out, &errOut); code != 1 || !strings.Contains(out.String(), "bad.go: imports not in three groups") {
		t.Fatalf("check: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run([]string{"-fix", dir}, &out, &errOut); code != 0 {
		t.Fatalf("fix: exit %d, stderr %q", code, errOut.String())
	}
	if code := run([]string{dir}, &out, &errOut); code != 0 {
		t.Errorf("after fix: exit %d", code)
	}
	if code := run(nil, &out, &errOut); code != 2 {
		t.Errorf("no arguments: exit %d, want 2", code)
	}
}
