// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"reflect"
	"testing"
)

func TestCodeBlocks(t *testing.T) {
	src := "# Doc\n\n## Install\n\n### Binary\n\n```sh\necho one\n# not a heading\n```\n\ntext\n\n```\nplain\n```\n\n## Upgrade\n\n```yaml\nk: v\n```\n"
	got := CodeBlocks(src)
	want := []CodeBlock{
		{Headings: []string{"Doc", "Install", "Binary"}, Lang: "sh", Line: 7, Text: "echo one\n# not a heading\n"},
		{Headings: []string{"Doc", "Install", "Binary"}, Lang: "", Line: 14, Text: "plain\n"},
		{Headings: []string{"Doc", "Upgrade"}, Lang: "yaml", Line: 20, Text: "k: v\n"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CodeBlocks:\n got %+v\nwant %+v", got, want)
	}
	if !got[0].Under("Install") || got[2].Under("Install") || !got[2].Under("Upgrade") {
		t.Error("Under")
	}
}
