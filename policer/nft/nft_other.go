// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package nft

import "fmt"

// Table is an nftables table of sluice's own; on this system it cannot
// exist (Open always fails).
type Table struct{}

// Open fails: nftables is Linux only.
func Open(Config) (*Table, error) {
	return nil, fmt.Errorf("%w: nftables needs Linux", ErrUnsupported)
}

// RemoveStale does nothing on this system.
func RemoveStale() ([]string, error) { return nil, nil }

// TableNames returns no names: there are no nftables on this system.
func TableNames() ([]string, error) { return nil, nil }

// Name returns "".
func (*Table) Name() string { return "" }

// SetRate does nothing.
func (*Table) SetRate(float64) error { return nil }

// Rate returns 0.
func (*Table) Rate() float64 { return 0 }

// Counters returns zero counters.
func (*Table) Counters() (Counters, error) { return Counters{}, nil }

// Close does nothing.
func (*Table) Close() error { return nil }

// Dropped returns 0, 0.
func (*Table) Dropped() (global, source uint64, err error) { return 0, 0, nil }
