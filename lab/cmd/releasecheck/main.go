// SPDX-License-Identifier: Apache-2.0

// Command releasecheck checks a release directory written by
// scripts/release.sh, and that two builds of it are the same:
//
//	go -C lab run ./cmd/releasecheck -version 0.1.0 ../dist [../dist-again]
//
// With one directory it checks SHA256SUMS, the binaries (static, for their
// architecture, with the version), the SBOMs against the binaries (every
// module they hold, and nothing else) and the image (its name, platforms,
// labels and the binaries in its layers). With two it checks both and
// that they hold the same files, byte for byte. `make release-check` runs
// it on two builds of one commit from two directories. Exit status 1
// names every problem found.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/sluicehq/sluice/lab/release"
)

func main() {
	version := flag.String("version", "", "the release's version (scripts/version.sh; required)")
	flag.Parse()
	if *version == "" || flag.NArg() < 1 || flag.NArg() > 2 {
		fmt.Fprintln(os.Stderr, "usage: releasecheck -version V DIR [DIR2]")
		os.Exit(2)
	}
	var errs []error
	for _, dir := range flag.Args() {
		if err := release.Check(dir, *version); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", dir, err))
		}
	}
	if flag.NArg() == 2 {
		errs = append(errs, release.Compare(flag.Arg(0), flag.Arg(1)))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, "releasecheck:", err)
		os.Exit(1)
	}
	for _, dir := range flag.Args() {
		comps, _ := release.SBOMComponents(dir + "/" + release.SBOMName(*version, release.Arches[0]))
		fmt.Printf("releasecheck: %s: sluice %s for %v: checksums, static binaries, SBOMs (%d modules), image: ok\n",
			dir, *version, release.Arches, len(comps))
	}
	if flag.NArg() == 2 {
		fmt.Printf("releasecheck: %s and %s are the same, byte for byte\n", flag.Arg(0), flag.Arg(1))
	}
}
