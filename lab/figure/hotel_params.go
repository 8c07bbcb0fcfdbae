// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"errors"
	"strings"
)

// Text declares a free text parameter (a file name); it must not be
// empty or contain a newline.
func (ps *Params) Text(p *string, name, def, doc string) {
	*p = def
	ps.declare(name, "text", def, doc, func(s string) error {
		if s == "" || strings.ContainsAny(s, "\r\n") {
			return errors.New("want a non-empty value on one line")
		}
		*p = s
		return nil
	})
}
