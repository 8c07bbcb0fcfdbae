// SPDX-License-Identifier: Apache-2.0

package reliability

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the child backend when asked to (see startChild), and
// otherwise the tests, failing them if any goroutine they started is
// still running when they end.
func TestMain(m *testing.M) {
	if addr := os.Getenv(childEnv); addr != "" {
		os.Exit(runChild(addr))
	}
	goleak.VerifyTestMain(m)
}
