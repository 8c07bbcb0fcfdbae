// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"cmp"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is the version string of a release build, set at link time by
// scripts/build.sh from `git describe --tags` (scripts/version.sh):
//
//	go build -ldflags "-X github.com/sluicehq/sluice/internal/cli.version=0.1.0" ./cmd/sluice
//
// A leading "v" is dropped: the Git tag v0.1.0 is version 0.1.0.
var version string

// commit is the VCS revision set at link time, for builds that record
// none (-buildvcs=false, as every build of scripts/build.sh is):
//
//	go build -ldflags "-X github.com/sluicehq/sluice/internal/cli.commit=$(git rev-parse HEAD)" ./cmd/sluice
//
// A revision recorded in the build info wins.
var commit string

// DevVersion is the version of a build that was given none, neither at
// link time nor by the module system (go build or go run in a source
// tree without -ldflags): DevVersion+"+"+the commit's first 12 hex digits
// when the commit is known (with "-dirty" when the tree had uncommitted
// changes), DevVersion alone otherwise. scripts/version.sh gives the same
// string for a tree without a release tag.
const DevVersion = "0.0.0-dev"

// BuildInfo is what `sluice version` prints: where the binary comes from.
type BuildInfo struct {
	// Version is the one version string of this binary: `sluice
	// version`, the sluice_build_info metric, OpenTelemetry's
	// service.version and the container image's
	// org.opencontainers.image.version label all carry it. It is a
	// semantic version without the leading "v": the one set at link time,
	// else the module version (go install ...@v0.1.0 gives 0.1.0), else
	// DevVersion with the commit as build metadata.
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

// Version returns the running binary's build information. It is the one
// source of sluice's version string (its Version field): whatever reports
// the version reads it here.
func Version() BuildInfo {
	bi, _ := debug.ReadBuildInfo() // nil when the binary has none
	return buildInfoOf(bi, version, commit)
}

// buildInfoOf combines the build info recorded by the toolchain (nil when
// there is none) with the version and commit set at link time.
func buildInfoOf(bi *debug.BuildInfo, linkVersion, linkCommit string) BuildInfo {
	b := BuildInfo{GoVersion: "(unknown go)"}
	modVersion := ""
	if bi != nil {
		b.GoVersion, modVersion = bi.GoVersion, bi.Main.Version
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
	}
	b.Commit = cmp.Or(b.Commit, linkCommit)
	switch {
	case linkVersion != "":
		b.Version = linkVersion
	case modVersion != "" && modVersion != "(devel)":
		b.Version = modVersion
	default:
		b.Version = devVersion(b.Commit)
	}
	b.Version = trimV(b.Version)
	return b
}

// devVersion is DevVersion with commit (a full revision, maybe with
// "-dirty") as build metadata.
func devVersion(commit string) string {
	if commit == "" {
		return DevVersion
	}
	rev, dirty := strings.CutSuffix(commit, "-dirty")
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return DevVersion + "+" + rev
}

// trimV drops the "v" of a Git tag or module version ("v0.1.0" → "0.1.0").
func trimV(v string) string {
	if len(v) > 1 && v[0] == 'v' && v[1] >= '0' && v[1] <= '9' {
		return v[1:]
	}
	return v
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Long: `version prints sluice's version (a semantic version such as 0.1.0, set by
the release build from the Git tag; ` + DevVersion + `+COMMIT for a build that
was given none), the VCS commit the binary was built from when the build
recorded it, and the Go toolchain. sluice --version prints the same line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), Version())
			return err
		},
	}
}
