// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/strictyaml"
)

// parseSection reads a file holding a response_buffering section as the
// proxy's loader does (strictly, defaults set, validated, errors placed
// at their file and line).
func parseSection(name, text string) error {
	var f struct {
		ResponseBuffering Config `yaml:"response_buffering"`
	}
	root, err := strictyaml.DecodeFile(name, []byte(text), &f, "response_buffering")
	if err != nil {
		return err
	}
	f.ResponseBuffering.SetDefaults()
	return strictyaml.Locate(name, root, f.ResponseBuffering.Validate())
}

// Each invalid value is refused with its field's path, its value and
// its line; an unknown key too.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ section, want string }{
		{"  memory_bytes: 1000\n", "response_buffering.memory_bytes: 1000 is invalid"},
		{"  max_memory_bytes: 40000\n", "response_buffering.max_memory_bytes: 40000 is invalid"},
		{"  max_file_bytes: -2\n", "response_buffering.max_file_bytes: -2 is invalid"},
		{"  max_disk_bytes: -1\n", "response_buffering.max_disk_bytes: -1 is invalid"},
		{"  temp_dir: /nonexistent/dir\n", `response_buffering.temp_dir: "/nonexistent/dir" is invalid`},
		{"  exclude_paths: [raw]\n", `response_buffering.exclude_paths[0]: "raw" is invalid`},
		{"  exclude_content_types: [\" \"]\n", `response_buffering.exclude_content_types[0]: " " is invalid`},
		{"  connection_memory_bytes: -2\n", "response_buffering.connection_memory_bytes: -2 is invalid"},
		{"  soft_memory_limit_bytes: 1048576\n", "response_buffering.soft_memory_limit_bytes: 1048576 is invalid"},
		{"  soft_memory_limit_bytes: -2\n", "response_buffering.soft_memory_limit_bytes: -2 is invalid"},
		{"  bogus: 1\n", "bogus"},
	} {
		err := parseSection("p.yaml", "response_buffering:\n"+tc.section)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.section, err, tc.want)
			continue
		}
		if !regexp.MustCompile(`^p\.yaml:\d+: `).MatchString(err.Error()) {
			t.Errorf("%q: %v: no file:line", tc.section, err)
		}
	}
}

// The defaults make a valid section.
func TestConfigDefaultsValid(t *testing.T) {
	if err := parseSection("p.yaml", "response_buffering: {}\n"); err != nil {
		t.Fatal(err)
	}
}
