// SPDX-License-Identifier: Apache-2.0

// Package tlsconf is the TLS of the proxy's listeners, of its admin
// listener and of its upstream connections: the configuration sections
// (tls: of a listener and of admin, backends.tls), their defaults and
// validation, the loading of the certificate files, and the watch that
// re-reads them and puts new contents in service without a restart.
//
// The proxy (package proxy) names these types TLSConfig and
// UpstreamTLSConfig; their YAML keys, defaults and errors (FieldError
// paths under the path each Validate is given) are the proxy's.
package tlsconf
