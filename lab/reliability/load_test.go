// SPDX-License-Identifier: Apache-2.0

package reliability

import (
	"net/http"
	"reflect"
	"testing"
	"time"
)

// Recovery is the start of the first second from which every later second
// has at least the fraction served; ServedBySecond gives each second's
// fraction, -1 for a second without requests, and counts the 503s.
func TestRecoveryBySecond(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var ss []Sample
	add := func(sec float64, status int) {
		ss = append(ss, Sample{At: t0.Add(time.Duration(sec * float64(time.Second))), Status: status})
	}
	add(-0.5, http.StatusOK) // before t: not counted
	add(0.1, http.StatusServiceUnavailable)
	add(0.6, http.StatusOK)
	add(1.2, http.StatusOK)
	add(1.7, 0) // a timeout
	// second 2: none
	add(3.0, http.StatusOK)
	add(3.9, http.StatusOK)
	add(4.5, http.StatusOK)
	served, rejected := ServedBySecond(ss, t0)
	if want := []float64{0.5, 0.5, -1, 1, 1}; !reflect.DeepEqual(served, want) || rejected != 1 {
		t.Fatalf("served %v, rejected %d; want %v, 1", served, rejected, want)
	}
	if rec, _ := Recovery(ss, t0, 0.99); rec != 2*time.Second {
		t.Errorf("recovery %v, want 2s (the empty second counts as recovered)", rec)
	}
	if rec, _ := Recovery(ss, t0, 0.5); rec != 0 {
		t.Errorf("recovery at half served %v, want 0", rec)
	}
	add(5.5, http.StatusServiceUnavailable)
	if rec, _ := Recovery(ss, t0, 0.99); rec != -1 {
		t.Errorf("recovery with the last second under: %v, want -1", rec)
	}
}
