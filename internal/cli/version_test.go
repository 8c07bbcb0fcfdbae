package cli

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildInfoOf(t *testing.T) {
	cases := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"release", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}},
			"sluice v1.2.0 (commit abc123) go1.26.8"},
		{"dirty tree", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			"sluice (devel) (commit abc123-dirty) go1.26.8"},
		{"no vcs", debug.BuildInfo{GoVersion: "go1.26.8"}, "sluice (devel) go1.26.8"},
	}
	for _, c := range cases {
		if got := buildInfoOf(&c.bi).String(); got != c.want {
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
		if !strings.HasPrefix(out, "sluice ") || !strings.HasSuffix(out, " "+runtime.Version()+"\n") {
			t.Errorf("%q: %q, want sluice VERSION ... %s", args, out, runtime.Version())
		}
	}
	old := version
	version = "v9.9.9"
	t.Cleanup(func() { version = old })
	if v := Version().Version; v != "v9.9.9" {
		t.Errorf("version set at link time: %q", v)
	}
	oldCommit := commit
	commit = "0123abcd"
	t.Cleanup(func() { commit = oldCommit })
	if b := Version(); b.Commit == "" {
		t.Errorf("commit set at link time is not reported: %+v", b)
	}
	if code, _, errOut := runCLI(t, "version", "extra"); code != 2 {
		t.Errorf("version extra: exit %d (%s), want 2", code, errOut)
	}
}
