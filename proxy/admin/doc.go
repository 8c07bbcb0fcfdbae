// SPDX-License-Identifier: Apache-2.0

// Package admin is the proxy's admin API and the glue of its live
// dashboard: the admin section of the configuration file (Config, the
// proxy's AdminConfig) with its defaults and validation, the route table
// (/healthz, /readyz, /metrics, /state, /config, /reload,
// /stages/{name}/target, /shadow, /ui, /debug/pprof), the guard of each
// route (the bearer token, admin.public, the dashboard's session cookie,
// the body bound) and the handlers.
//
// The handlers read and change the proxy through the Server interface,
// which package proxy implements over its running configuration; New is
// the proxy's, as the dashboard's view is an internal type.
package admin
