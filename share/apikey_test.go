// SPDX-License-Identifier: Apache-2.0

package share

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// API keys are secrets: every printer and encoder shows the placeholder,
// and they still name their client.
func TestAPIKeysAreSecret(t *testing.T) {
	const key = "K-secret-4d2a9e"
	cfg := matcherConfig()
	cfg.Clients[4].APIKeys = []APIKey{key}
	y, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{string(y), string(j), fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg)} {
		if strings.Contains(out, key) {
			t.Fatalf("the key is shown: %s", out)
		}
	}
	m, err := NewMatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Match(Identity{APIKey: key}); c != 4 {
		t.Fatalf("the key names client %d, want 4", c)
	}
	// The file form is the configuration loader's: alone, it is refused.
	cfg.Clients[4].APIKeys, cfg.Clients[4].APIKeysFile = nil, "/run/secrets/keys"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "clients[4].api_keys_file") {
		t.Fatalf("api_keys_file without keys: %v", err)
	}
}
