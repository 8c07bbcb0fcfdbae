// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"fmt"
	"sync"
	"time"
)

// ClassBuckets is one TokenBucket per request class, as in SEDA's
// class-based admission control: class 0 is the highest priority and each
// class has its own rate, set by its own controller. All buckets share one
// burst size.
//
// AllowAt treats a class outside [0, Len()) as the lowest class (Len()−1),
// so an unknown or spoofed class can never gain priority.
//
// The zero value has no classes and refuses everything; use
// NewClassBuckets. ClassBuckets is safe for concurrent use by multiple
// goroutines; AllowAt takes no lock of its own.
type ClassBuckets struct {
	mu      sync.Mutex // serialises SetRatesAt and Rates
	buckets []*TokenBucket
}

// NewClassBuckets returns one full bucket per entry of rates (at least one;
// rates[i] in tokens per second, finite and ≥ 0 or +Inf), each of capacity
// burst (≥ 1). The error names the bad entry and its value.
func NewClassBuckets(rates []float64, burst int) (*ClassBuckets, error) {
	if len(rates) == 0 {
		return nil, fmt.Errorf("gate: rates: need at least one class, got none")
	}
	if err := checkBurst(burst); err != nil {
		return nil, err
	}
	if err := checkRates(rates); err != nil {
		return nil, err
	}
	c := &ClassBuckets{buckets: make([]*TokenBucket, len(rates))}
	for i, r := range rates {
		b, err := NewTokenBucket(r, burst)
		if err != nil { // unreachable after checkRates
			return nil, err
		}
		c.buckets[i] = b
	}
	return c, nil
}

func checkRates(rates []float64) error {
	for i, r := range rates {
		if err := checkRate(fmt.Sprintf("rates[%d]", i), r); err != nil {
			return err
		}
	}
	return nil
}

// Len returns the number of classes.
func (c *ClassBuckets) Len() int { return len(c.buckets) }

// classIndex maps class to a bucket index: out of range means lowest.
func (c *ClassBuckets) classIndex(class int) int {
	if class < 0 || class >= len(c.buckets) {
		return len(c.buckets) - 1
	}
	return class
}

// AllowAt reports whether one request of the given class arriving at now is
// admitted by that class's bucket, taking a token if so. A class outside
// [0, Len()) is treated as the lowest class, Len()−1.
func (c *ClassBuckets) AllowAt(now time.Time, class int) bool {
	if len(c.buckets) == 0 {
		return false
	}
	return c.buckets[c.classIndex(class)].AllowAt(now)
}

// Bucket returns the bucket of class (out of range: the lowest class), for
// reading its tokens or adjusting its burst; nil if there are no classes.
func (c *ClassBuckets) Bucket(class int) *TokenBucket {
	if len(c.buckets) == 0 {
		return nil
	}
	return c.buckets[c.classIndex(class)]
}

// SetRatesAt sets every class's rate from now on. rates must have Len()
// entries, each finite and ≥ 0 or +Inf; on error no rate changes.
func (c *ClassBuckets) SetRatesAt(now time.Time, rates []float64) error {
	if len(rates) != len(c.buckets) {
		return fmt.Errorf("gate: rates: got %d entries, want one per class (%d)", len(rates), len(c.buckets))
	}
	if err := checkRates(rates); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, r := range rates {
		if err := c.buckets[i].SetRateAt(now, r); err != nil { // unreachable after checkRates
			return err
		}
	}
	return nil
}

// Rates returns a copy of the classes' rates, highest priority first.
func (c *ClassBuckets) Rates() []float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]float64, len(c.buckets))
	for i, b := range c.buckets {
		out[i] = b.Rate()
	}
	return out
}
