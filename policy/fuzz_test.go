// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzPrefersJSON: the Accept parser never panics and never prefers JSON
// when the header does not mention application/json or application/*.
func FuzzPrefersJSON(f *testing.F) {
	for _, s := range []string{"", "*/*", "application/json", "text/html;q=0.9, application/json;q=1",
		";;,,q=", "application/json;q=NaN", "application/*;q=1e400", "APPLICATION/JSON;Q=.5, text/*"} {
		f.Add(s, "text/plain")
	}
	f.Fuzz(func(t *testing.T, accept, text string) {
		got := prefersJSON([]string{accept}, text)
		l := strings.ToLower(accept)
		if got && !strings.Contains(l, "application/json") && !strings.Contains(l, "application/*") {
			t.Fatalf("%q prefers JSON", accept)
		}
	})
}

// FuzzValidate: any policy document that decodes validates or fails with
// an error, never a panic, and New agrees with Validate.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{validBase,
		"stages: [{name: a, controller: seda, params: {target: 1s, degrade: {enabled: true}}}]",
		"stages: [{name: a, controller: seda, params: [1]}]",
		"stages: [{name: a, controller: static-concurrency, params: {limit: 2}, queue: {max: 1, timeout: 1ms}}]",
		"classes: {order: [a, b], rules: [{class: a, cidrs: ['::1', 10.0.0.0/8]}]}",
		"reject: {body: '{{.Stage}}', content_type: text/html}",
		"stages: [{name: a, controller: seda, params: {target: 1s, degrade: *x}}]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		var c Config
		if err := yaml.Unmarshal([]byte(src), &c); err != nil {
			return
		}
		c.SetDefaults()
		verr := c.Validate()
		p, nerr := New(c, Options{})
		if (verr == nil) != (nerr == nil) {
			t.Fatalf("Validate: %v, New: %v", verr, nerr)
		}
		if p != nil && len(p.Stages()) != len(c.Stages)+1 {
			t.Fatalf("%d stages for %d configured", len(p.Stages()), len(c.Stages))
		}
	})
}
