// SPDX-License-Identifier: Apache-2.0

package simulated

import "strconv"

// fmtNum formats a number as briefly as it parses back.
func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
