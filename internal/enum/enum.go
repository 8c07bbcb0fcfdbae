// SPDX-License-Identifier: Apache-2.0

// Package enum names the values of the small integer enumerations of
// sluice's packages (outcomes, verdicts, reasons) from one table each.
package enum

import "fmt"

// Name returns names[v], or typ(v) — "Outcome(7)" — when v has no name
// (out of the table, or an empty entry).
func Name[T ~uint8](v T, names []string, typ string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}
