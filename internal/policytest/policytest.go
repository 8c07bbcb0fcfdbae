// SPDX-License-Identifier: Apache-2.0

// Package policytest builds policies from YAML for the tests of the
// packages that serve them (the middleware, grpcsluice).
package policytest

import (
	"context"

	"github.com/sluicehq/sluice/internal/testkit"
	"github.com/sluicehq/sluice/policy"
)

// New reads src as a policy file (policy.Parse: unknown keys are errors)
// and builds it with no options, failing t on any error.
func New(t testkit.TB, src string) *policy.Policy {
	t.Helper()
	cfg, err := policy.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	p, err := policy.New(*cfg, policy.Options{})
	if err != nil {
		t.Fatalf("policy.New: %v", err)
	}
	return p
}

// Running is New with the policy's control loop (Policy.Run) running
// until t and its subtests end.
func Running(t testkit.TB, src string) *policy.Policy {
	t.Helper()
	p := New(t, src)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go p.Run(ctx)
	return p
}
