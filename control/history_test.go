// SPDX-License-Identifier: Apache-2.0

package control

import (
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
)

func TestHistoryRing(t *testing.T) {
	if _, err := NewHistory(0); err == nil || FieldOf(err) != "history" {
		t.Fatalf("NewHistory(0): %v", err)
	}
	h, _ := NewHistory(3)
	if h.Last(5) != nil || h.Len() != 0 {
		t.Fatal("empty history")
	}
	for i := 1; i <= 5; i++ {
		h.Add(sluice.Decision{New: float64(i)})
	}
	got := h.Last(10)
	if len(got) != 3 || got[0].New != 3 || got[2].New != 5 || h.Len() != 3 {
		t.Fatalf("Last = %+v", got)
	}
	if got := h.Last(2); got[0].New != 4 || got[1].New != 5 {
		t.Fatalf("Last(2) = %+v", got)
	}
}

func TestLoggedRecordsAndIsSafe(t *testing.T) {
	c, _ := NewSEDA(sedaCfg(1e9, 100))
	l, err := WithHistory(c, 4)
	if err != nil {
		t.Fatal(err)
	}
	if l.TriggerSamples() != 100 {
		t.Fatal("trigger not forwarded")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			_ = l.History.Last(4)
		}
	}()
	for i := 1; i <= 200; i++ {
		l.Update(at(i), p90(0, 2))
	}
	wg.Wait()
	last := l.History.Last(4)
	if len(last) != 4 || last[3].New != l.Current().New {
		t.Fatalf("history %+v", last)
	}
}
