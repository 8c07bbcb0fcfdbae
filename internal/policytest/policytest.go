// SPDX-License-Identifier: Apache-2.0

// Package policytest builds policies from YAML for the tests of the
// packages that serve them (the middleware, grpcsluice).
package policytest

import (
	"github.com/sluicehq/sluice/policy"
)

// TB is the part of testing.TB New uses (so that the product's packages
// do not depend on package testing: scripts/check-lean.sh).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// New reads src as a policy file (policy.Parse: unknown keys are errors)
// and builds it with no options, failing t on any error.
func New(t TB, src string) *policy.Policy {
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
