// SPDX-License-Identifier: Apache-2.0

package proxy

import "github.com/sluicehq/sluice/policy"

func policySetDefaults(c *policy.Config) { c.SetDefaults() }

func policyValidate(c *policy.Config) error { return c.Validate() }
