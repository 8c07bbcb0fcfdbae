package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version overrides the module version read from the build info; set it
// at link time for release builds:
//
//	go build -ldflags "-X github.com/sluicehq/sluice/internal/cli.version=v1.2.3" ./cmd/sluice
var version string

// commit is the VCS revision set at link time, for builds that record
// none (-buildvcs=false, a build outside the repository such as the
// container image's: scripts/image.sh):
//
//	go build -ldflags "-X github.com/sluicehq/sluice/internal/cli.commit=$(git rev-parse HEAD)" ./cmd/sluice
//
// A revision recorded in the build info wins.
var commit string

// BuildInfo is what `sluice version` prints: where the binary comes from.
type BuildInfo struct {
	// Version is the module version ("(devel)" for a build from a source
	// tree), or the one set at link time.
	Version string
	// Commit is the VCS revision the binary was built from, with
	// "-dirty" appended when the tree had uncommitted changes; "" when
	// the build did not record it (go run, go test, a module download).
	Commit string
	// GoVersion is the toolchain that built the binary ("go1.26.8").
	GoVersion string
}

// String formats the build information on one line.
func (b BuildInfo) String() string {
	s := "sluice " + b.Version
	if b.Commit != "" {
		s += " (commit " + b.Commit + ")"
	}
	return s + " " + b.GoVersion
}

// Version reads the running binary's build information.
func Version() BuildInfo {
	b := BuildInfo{Version: "(unknown)", GoVersion: "(unknown go)"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b = buildInfoOf(bi)
	}
	if version != "" {
		b.Version = version
	}
	if b.Commit == "" {
		b.Commit = commit
	}
	return b
}

// buildInfoOf extracts version, revision and toolchain from bi.
func buildInfoOf(bi *debug.BuildInfo) BuildInfo {
	b := BuildInfo{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if b.Commit != "" && dirty {
		b.Commit += "-dirty"
	}
	return b
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Long: `version prints the module version (or "(devel)" for a build from a
source tree), the VCS commit the binary was built from when the build
recorded it, and the Go toolchain. sluice --version prints the same line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), Version())
			return err
		},
	}
}
