// SPDX-License-Identifier: Apache-2.0

// Package doccheck holds the defaults that documentation states to the
// defaults the code sets, so that the two cannot drift apart (STYLE.md: "A
// default stated in a doc comment and again in code: let a test hold them
// equal"). It is a test helper: its only users are tests, and it does not
// import testing.
//
// A check has three parts.
//
//   - What is stated. Statements finds a default in prose: "(default
//     500ms)", "(defaults 1 and 10000)", "Default: none.", `"fifo"
//     (default)`, "5000 req/s by default", "default of 10"; CheckStruct
//     reads the field comments of a struct type parsed with go/parser
//     (LoadPackage), CheckProse a package or function doc comment, where
//     "Field value" pairs also state defaults (a Default…Config function's
//     summary), and CheckMarkdown a document: its "| field | default |
//     meaning |" tables, "`key` value" pairs, "`key = value`" code spans
//     and prose statements.
//   - What is real. A Context resolves the key a statement names (a Go
//     field name, a YAML key or path such as "backends.queue.max", or an
//     alias such as the paper's "Kp_q") in a defaulted configuration value
//     — what a Default…Config function returns or SetDefaults fills —
//     walked by reflection (Find).
//   - The comparison. Compare parses the stated literal (durations,
//     numbers with units, fractions such as 1/16, booleans, strings, lists,
//     "none") and compares it with the real value; a value that rounds
//     (2.81 for 2.8125) matches only when written with three significant
//     digits or more.
//
// Nothing is skipped silently: a statement the checker cannot map to a key,
// or whose value is a phrase ("a quarter of Period"), is a Finding unless
// the Context declares a Derived default that verifies what the phrase says
// (or an Ignore entry that says why the text is no default); a Derived or
// Ignore entry that no statement uses is a Finding too. Context.Mutate
// lets a test replace one real default and see that its statements fail,
// which proves every comparison the checker makes.
//
// The registry of what is checked — every configuration type, its
// defaulted value, every document section's context — is the test of this
// package (defaults_test.go, docs_test.go).
//
// CodeBlocks returns a document's fenced code blocks with their
// headings, for the tests that run the commands a document shows
// (docs/operations.md's Install and Upgrade: lab/release).
package doccheck
