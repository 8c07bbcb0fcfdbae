// SPDX-License-Identifier: Apache-2.0

package auto

import "time"

// t0 is the start of every test's virtual clock.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
