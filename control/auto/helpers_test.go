// SPDX-License-Identifier: Apache-2.0

package auto

import "github.com/sluicehq/sluice/control/internal/ctltest"

// t0 is the start of every test's virtual clock.
var t0 = ctltest.T0
