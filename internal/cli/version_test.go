// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildInfoOf(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	cases := []struct {
		name                    string
		bi                      *debug.BuildInfo
		linkVersion, linkCommit string
		want                    string
	}{
		{"go install of a tag", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: vcs("abc123", "false")},
			"", "", "sluice 1.2.0 (commit abc123) go1.26.8"},
		{"release build", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"0.1.0", rev, "sluice 0.1.0 (commit " + rev + ") go1.26.8"},
		{"tag given with its v", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"v0.1.0-3-gabcdef012345", "", "sluice 0.1.0-3-gabcdef012345 go1.26.8"},
		{"link time wins over the module", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}},
			"1.3.0", "", "sluice 1.3.0 go1.26.8"},
		{"dirty tree, no version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")},
			"", "", "sluice 0.0.0-dev+0123456789ab-dirty (commit " + rev + "-dirty) go1.26.8"},
		{"commit at link time only", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"", rev, "sluice 0.0.0-dev+0123456789ab (commit " + rev + ") go1.26.8"},
		{"recorded revision wins", &debug.BuildInfo{GoVersion: "go1.26.8", Settings: vcs("abc123", "false")},
			"", rev, "sluice 0.0.0-dev+abc123 (commit abc123) go1.26.8"},
		{"no vcs", &debug.BuildInfo{GoVersion: "go1.26.8"}, "", "", "sluice 0.0.0-dev go1.26.8"},
		{"no build info", nil, "0.2.0", "", "sluice 0.2.0 (unknown go)"},
	}
	for _, c := range cases {
		if got := buildInfoOf(c.bi, c.linkVersion, c.linkCommit).String(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := runCLI(t, args...)
		if code != 0 || errOut != "" {
			t.Fatalf("%q: exit %d, stderr %q", args, code, errOut)
		}
		if want := Version().String() + "\n"; out != want {
			t.Errorf("%q: %q, want %q", args, out, want)
		}
		if !strings.HasPrefix(out, "sluice ") || !strings.HasSuffix(out, " "+runtime.Version()+"\n") {
			t.Errorf("%q: %q, want sluice VERSION ... %s", args, out, runtime.Version())
		}
	}
	old, oldCommit := version, commit
	t.Cleanup(func() { version, commit = old, oldCommit })
	version, commit = "v9.9.9", "0123abcd"
	if b := Version(); b.Version != "9.9.9" || b.Commit == "" {
		t.Errorf("version and commit set at link time: %+v", b)
	}
	if code, out, _ := runCLI(t, "version"); code != 0 || !strings.HasPrefix(out, "sluice 9.9.9 ") {
		t.Errorf("sluice version with a link-time version: exit %d, %q", code, out)
	}
	if code, _, errOut := runCLI(t, "version", "extra"); code != 2 {
		t.Errorf("version extra: exit %d (%s), want 2", code, errOut)
	}
}
