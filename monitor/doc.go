// SPDX-License-Identifier: Apache-2.0

// Package monitor turns requests and sensors into the sluice.Measurements
// that controllers consume once per control period.
//
// It provides three kinds of building blocks:
//
//   - Window, a ring buffer of the last n response times with exact
//     nearest-rank percentiles (SEDA's "(0.9 × nreq)-th sample"), and EWMA,
//     the exponentially weighted moving average v = α·v + (1−α)·x;
//   - Recorder, the per-period counters (arrivals, admissions, rejections,
//     completions) plus a Window, whose Collect produces one
//     sluice.Measurements per period;
//   - utilization sources (UtilizationSource): host CPU from /proc/stat
//     (ProcStat), a cgroup v2 group (Cgroup), one process (Process),
//     busy time of in-process servers (Busy) and a value reported by the
//     backend itself (Reported);
//   - network sensors: the outgoing byte queue of client sockets (OutQueue,
//     SocketQueue: Linux SIOCOUTQNSD/SIOCOUTQ, sampled many times per period
//     and averaged) and outgoing bytes/s against a link capacity
//     (Bandwidth).
//
// Like the rest of sluice, everything that depends on time takes now as an
// argument; nothing here reads the wall clock, sleeps or starts a
// goroutine, except RunOutQueueSampler, the one ticker loop that drives an
// OutQueue's sampling live. The hot-path methods (Window.Record, Recorder.Arrive, Admit,
// Reject, Complete) are safe for concurrent use and do not allocate.
package monitor
