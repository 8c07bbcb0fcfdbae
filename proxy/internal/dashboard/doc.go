// SPDX-License-Identifier: Apache-2.0

// Package dashboard is the proxy's live dashboard: a sampler that reads
// the server's state once a second and keeps ten minutes of it
// (history.go, sample.go), the page and the Server-Sent Events stream
// that show it in a browser (ui.go, the page in ui/index.html), and the
// metrics beside it (metrics.go).
//
// It sees the server only through View, a narrow read-only view of typed
// values that the proxy fills (view.go), and it is guarded by the
// proxy's admin token through Access; the routes, their paths and PUT
// /shadow stay the proxy's. The JSON it sends (Sample) is what the
// page's script reads: its field names are the page's contract.
package dashboard
