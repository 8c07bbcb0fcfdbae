// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	sclient "github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/proxy/overload"
)

// The backends.client and policer.control sections are the library's
// types: a file's section decodes into client.Config and
// control.VoigtQueueConfig as the library itself decodes it, with the
// proxy's own defaults (no throttling, no retries; the initial rate is
// policer.rate) on top.
func TestSectionsDecodeIntoLibraryTypes(t *testing.T) {
	const clientYAML = "{throttle: {enabled: true, k: 3}, retry: {max_attempts: 2}, min_remaining: 5ms}"
	const controlYAML = "{q_ref: 50, kp: 0.5, kd: 0, max_rate: 5000}"
	c, err := Parse("p.yaml", []byte(strings.Replace(baseConfig("http://127.0.0.1:1", ""), "  servers:",
		"  client: "+clientYAML+"\n  servers:", 1)+"policer: {rate: 500, control: "+controlYAML+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var wantClient sclient.Config
	if err := yaml.Unmarshal([]byte(clientYAML), &wantClient); err != nil {
		t.Fatal(err)
	}
	wantClient.SetDefaults()
	var got sclient.Config = c.Backends.Client
	if !reflect.DeepEqual(got, wantClient) {
		t.Errorf("backends.client\n got %+v\nwant %+v", got, wantClient)
	}
	wantControl := control.DefaultVoigtQueueConfig()
	if err := yaml.Unmarshal([]byte(controlYAML), &wantControl); err != nil {
		t.Fatal(err)
	}
	wantControl.InitialRate = 500
	var gotControl control.VoigtQueueConfig = c.Policer.Control.VoigtQueueConfig
	if gotControl != wantControl || gotControl.Kd != 0 || c.Policer.Control.History != overload.DefaultPolicerHistory {
		t.Errorf("policer.control\n got %+v history %d\nwant %+v (kd: 0 turns the derivative off)", gotControl, c.Policer.Control.History, wantControl)
	}

	// An absent kd is the library's.
	c, err = Parse("p.yaml", []byte(baseConfig("http://127.0.0.1:1", "policer: {control: {q_ref: 50}}\n")))
	if err != nil {
		t.Fatal(err)
	}
	if kd := c.Policer.Control.Kd; kd != control.DefaultVoigtQueueConfig().Kd {
		t.Errorf("kd %v without kd in the file", kd)
	}

	// What the proxy takes from elsewhere stays unset (or agrees).
	parseFails(t, []badConfig{
		{"  client: {tenant_header: X-Other}\n", "backends.client.tenant_header"},
		{"  client: {max_destinations: 3}\n", "backends.client.max_destinations"},
		{"policer: {rate: 500, control: {initial_rate: 7}}\n", "policer.control.initial_rate"},
	})
}
