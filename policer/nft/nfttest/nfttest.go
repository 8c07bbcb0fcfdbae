// SPDX-License-Identifier: Apache-2.0

// Package nfttest holds what the tests of the kernel path share (package
// nft's and the proxy's): a burst of connection requests, each a bare SYN
// from a non-blocking socket, so that what the kernel drops is seen before
// any handshake completes. Linux only, like the kernel path; nothing here
// is for production.
package nfttest
