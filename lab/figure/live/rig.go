// SPDX-License-Identifier: Apache-2.0

package live

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// The rig's own health during a row: a live row measures the system under
// test only while the load generator, the proxy and the backend, which
// share this process and the machine's cores, keep up. When they do not,
// clients time out before the proxy even accepts their connections, and
// the row measures the rig.

// rigSample is what rigNow reads: the process's CPU time and the host's
// count of connections dropped at a full accept queue.
type rigSample struct {
	at        time.Time
	cpu       time.Duration // user + system time of this process; 0 if unknown
	overflows uint64        // TcpExt ListenOverflows of /proc/net/netstat (host-wide)
	ok        bool          // overflows known
}

// rigCPU returns the process's CPU time (set on Linux).
var rigCPU = func() (time.Duration, bool) { return 0, false }

func rigNow() rigSample {
	s := rigSample{at: time.Now()}
	s.cpu, _ = rigCPU()
	s.overflows, s.ok = listenOverflows("/proc/net/netstat")
	return s
}

// rigUsage is what happened between two samples: the CPU cores this
// process used on average and the connections the host's listeners
// dropped because their accept queue was full.
type rigUsage struct {
	cores     float64
	overflows float64 // NaN if unknown
}

func rigBetween(a, b rigSample) rigUsage {
	u := rigUsage{overflows: math.NaN()}
	if d := b.at.Sub(a.at); d > 0 && b.cpu > 0 {
		u.cores = float64(b.cpu-a.cpu) / float64(d)
	}
	if a.ok && b.ok {
		u.overflows = float64(b.overflows - a.overflows)
	}
	return u
}

// listenOverflows reads TcpExt ListenOverflows from a /proc/net/netstat
// file: a header line of names and a line of values, each starting
// "TcpExt:".
func listenOverflows(path string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "TcpExt:" {
			continue
		}
		if names == nil {
			names = fields
			continue
		}
		for i, n := range names {
			if n == "ListenOverflows" && i < len(fields) {
				v, err := strconv.ParseUint(fields[i], 10, 64)
				return v, err == nil
			}
		}
		return 0, false
	}
	return 0, false
}
