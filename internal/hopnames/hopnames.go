// SPDX-License-Identifier: Apache-2.0

// Package hopnames gives the names of the hop headers their defaults, for
// the configurations that name them (package client's and package
// policy's).
package hopnames

import "github.com/sluicehq/sluice"

// SetDefaults sets each empty name to its default: sluice.PriorityHeader,
// sluice.TenantHeader and sluice.TimeoutHeader.
func SetDefaults(priority, tenant, timeout *string) {
	for _, f := range []struct {
		p   *string
		def string
	}{{priority, sluice.PriorityHeader}, {tenant, sluice.TenantHeader}, {timeout, sluice.TimeoutHeader}} {
		if *f.p == "" {
			*f.p = f.def
		}
	}
}
