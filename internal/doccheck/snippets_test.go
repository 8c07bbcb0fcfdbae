// SPDX-License-Identifier: Apache-2.0

package doccheck_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/doccheck"
)

// productDirs are the packages a document may name (pkg.Name).
var productDirs = []string{".", "classify", "client", "cluster", "control", "control/design", "gate", "grpcsluice",
	"monitor", "policer", "policy", "proxy", "share", "stage"}

// userDocs are the documents whose Go is checked: README.md and docs/*.md.
func userDocs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range append(files, filepath.Join(root, "README.md")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		out[filepath.ToSlash(rel)] = string(b)
	}
	return out
}

// Every Go snippet of README.md and docs/*.md is a run of lines of an
// Example function, which go test compiles and runs.
func TestGoSnippetsAreExamples(t *testing.T) {
	n := 0
	for name, src := range userDocs(t) {
		for _, s := range doccheck.GoSnippets(src) {
			n++
			if err := doccheck.CheckSnippet(root, s); err != nil {
				t.Errorf("%s:%d: %v", name, s.Line, err)
			}
		}
	}
	if n == 0 {
		t.Error("no Go snippet found in the documents")
	}
}

// Every Go identifier a document names in a code span (pkg.Name,
// pkg.Type.Member, Type.Member) exists.
func TestDocumentedIdentifiersExist(t *testing.T) {
	api, err := doccheck.LoadAPI(root, productDirs)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range userDocs(t) {
		for _, f := range api.CheckRefs(name, src) {
			t.Error(f)
		}
	}
}

// The checkers catch what they are for: a snippet that is not its
// Example's, one without a marker, and names that do not exist.
func TestDocCheckersCatch(t *testing.T) {
	doc := "<!-- example: stage ExampleStage_Admit -->\n```go\n" +
		"done, err := db.Admit(ctx, 0) // class 0 is the highest priority\n```\n\n" +
		"<!-- example: stage ExampleStage_Admit -->\n```go\ndone, err := db.Admit(ctx, 1)\n```\n\n" +
		"```go\nfmt.Println()\n```\n\n" +
		"<!-- example: stage ExampleStage_Admit -->\n```go\nimport \"net/http\"\n\ndone, err := db.Admit(ctx, 0) // class 0 is the highest priority\n```\n"
	snips := doccheck.GoSnippets(doc)
	if len(snips) != 4 {
		t.Fatalf("%d snippets, want 4", len(snips))
	}
	// The Example's lines are indented by one level inside query.
	snips[0].Text = "    " + snips[0].Text
	want := []string{"", "is not a line of ExampleStage_Admit", "without <!-- example:", `imports "net/http"`}
	for i, s := range snips {
		if i == 3 {
			s.Text = strings.Replace(s.Text, "done", "    done", 1)
		}
		err := doccheck.CheckSnippet(root, s)
		if got := errString(err); want[i] == "" && err != nil || want[i] != "" && !strings.Contains(got, want[i]) {
			t.Errorf("snippet %d: %v, want %q", i, err, want[i])
		}
	}

	api, err := doccheck.LoadAPI(root, productDirs)
	if err != nil {
		t.Fatal(err)
	}
	refs := "`stage.Ticket.Done` `Ticket.Finish(now, o)` `policy.Wrap` `sluice.ErrRejected` `http.Handler` `pol.Run(ctx)`\n" +
		"`Ticket.DoneAfter(rt, ok, sample)` `stage.Ticket.DoneStream` `policy.Nope` `sluice.Policy.Admit` `sluice.Policy.Nope`\n"
	var got []string
	for _, f := range api.CheckRefs("x.md", refs) {
		got = append(got, f.Msg)
	}
	if len(got) != 4 || !strings.Contains(got[0], "Ticket.DoneAfter") || !strings.Contains(got[1], "DoneStream") ||
		!strings.Contains(got[2], "no exported Nope") || !strings.Contains(got[3], "Policy has no method or field Nope") {
		t.Errorf("findings %q, want Ticket.DoneAfter, stage.Ticket.DoneStream, policy.Nope and sluice.Policy.Nope", got)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
