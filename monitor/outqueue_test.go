// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeQueue returns scripted queue lengths; a negative value is an error.
type fakeQueue struct {
	mu     sync.Mutex
	values []int64
	calls  int
}

func (f *fakeQueue) QueuedBytes() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if len(f.values) == 0 {
		return 0, errors.New("fake queue: script exhausted")
	}
	v := f.values[0]
	f.values = f.values[1:]
	if v < 0 {
		return 0, fmt.Errorf("fake queue: failure %d", -v)
	}
	return v, nil
}

func (f *fakeQueue) Describe() string { return "fake queue" }

func queueConfig(capacity int64) OutQueueConfig {
	c := DefaultOutQueueConfig()
	c.CapacityBytes = capacity
	return c
}

func TestOutQueueConfigValidate(t *testing.T) {
	mod := func(f func(*OutQueueConfig)) OutQueueConfig {
		c := queueConfig(1000)
		f(&c)
		return c
	}
	tests := []struct {
		name string
		cfg  OutQueueConfig
		frag []string // nil: valid
	}{
		{"valid", queueConfig(1000), nil},
		{"unacked", mod(func(c *OutQueueConfig) { c.Mode = QueueUnacked }), nil},
		{"no capacity", DefaultOutQueueConfig(), []string{"capacity_bytes", "0"}},
		{"negative capacity", queueConfig(-5), []string{"capacity_bytes", "-5"}},
		{"scale NaN", mod(func(c *OutQueueConfig) { c.Scale = math.NaN() }), []string{"scale", "NaN"}},
		{"scale zero", mod(func(c *OutQueueConfig) { c.Scale = 0 }), []string{"scale", "0"}},
		{"period", mod(func(c *OutQueueConfig) { c.Period = 0 }), []string{"period", "0s"}},
		{"too few samples", mod(func(c *OutQueueConfig) { c.SamplesPerPeriod = 9 }), []string{"samples_per_period", "9", ">= 10"}},
		{"interval under 1ms", mod(func(c *OutQueueConfig) { c.Period = 5 * time.Millisecond }), []string{"samples_per_period", "under 1ms"}},
		{"mode", mod(func(c *OutQueueConfig) { c.Mode = "sent" }), []string{"mode", `"sent"`}},
		{"empty mode", mod(func(c *OutQueueConfig) { c.Mode = "" }), []string{"mode", `""`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.frag == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			wantErr(t, "Validate", err, tt.frag...)
			_, err = NewOutQueue(tt.cfg, &fakeQueue{}, qt0)
			wantErr(t, "NewOutQueue", err, append([]string{"outgoing queue sensor"}, tt.frag...)...)
		})
	}
	if _, err := NewOutQueue(queueConfig(10), nil, qt0); err == nil {
		t.Error("NewOutQueue with a nil reader: no error")
	}
	if got := queueConfig(10).SampleInterval(); got != 50*time.Millisecond {
		t.Errorf("SampleInterval = %v, want 50ms (1s / 20)", got)
	}
}

func TestOutQueueAveraging(t *testing.T) {
	tests := []struct {
		name     string
		capacity int64
		scale    float64
		values   []int64 // one period; negative = failed sample
		want     OutQueueReading
		errFrag  string
	}{
		{"empty queue", 1000, 100, []int64{0, 0, 0, 0}, OutQueueReading{Queue: 0, MeanBytes: 0, Samples: 4}, ""},
		// mean 350 bytes of 1000 → 35, the paper's q_ref
		{"q_ref", 1000, 100, []int64{100, 200, 500, 600}, OutQueueReading{Queue: 35, MeanBytes: 350, MaxBytes: 600, Samples: 4}, ""},
		{"failed samples are not zeros", 1000, 100, []int64{400, -1, 800, -2}, OutQueueReading{Queue: 60, MeanBytes: 600, MaxBytes: 800, Samples: 2, Failed: 2}, ""},
		{"over capacity not clamped", 100, 100, []int64{150, 250}, OutQueueReading{Queue: 200, MeanBytes: 200, MaxBytes: 250, Samples: 2}, ""},
		{"other scale", 2000, 1, []int64{500, 1500}, OutQueueReading{Queue: 0.5, MeanBytes: 1000, MaxBytes: 1500, Samples: 2}, ""},
		{"no successful sample", 1000, 100, []int64{-1, -7}, OutQueueReading{Failed: 2}, "failure 7"},
		{"no sample at all", 1000, 100, nil, OutQueueReading{}, "no successful sample"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := queueConfig(tt.capacity)
			cfg.Scale = tt.scale
			f := &fakeQueue{values: tt.values}
			q, err := NewOutQueue(cfg, f, qt0)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range tt.values {
				err := q.Sample(qt0.Add(time.Duration(i+1) * 50 * time.Millisecond))
				if (v < 0) != (err != nil) {
					t.Fatalf("sample %d (%d): error %v", i, v, err)
				}
			}
			got, err := q.Collect(qt0.Add(time.Second))
			tt.want.Elapsed = time.Second
			if tt.errFrag != "" {
				wantErr(t, "Collect", err, "outgoing queue sensor", "fake queue", tt.errFrag)
				if !math.IsNaN(got.Queue) || !math.IsNaN(got.MeanBytes) {
					t.Errorf("Collect without samples: Queue %v, MeanBytes %v; want NaN (no silent zero)", got.Queue, got.MeanBytes)
				}
				got.Queue, got.MeanBytes = 0, 0
			} else if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			if math.Abs(got.Queue-tt.want.Queue) > 1e-12 {
				t.Errorf("Queue = %v, want %v", got.Queue, tt.want.Queue)
			}
			got.Queue = tt.want.Queue
			if got != tt.want {
				t.Errorf("Collect = %+v, want %+v", got, tt.want)
			}
			// The next period starts empty.
			f.values = []int64{90}
			if err := q.Sample(qt0.Add(1100 * time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			next, err := q.Collect(qt0.Add(1500 * time.Millisecond))
			if err != nil || next.Samples != 1 || next.MeanBytes != 90 || next.Failed != 0 || next.Elapsed != 500*time.Millisecond {
				t.Errorf("next period = %+v, %v; want one sample of 90 bytes over 500ms", next, err)
			}
		})
	}
}

func TestRunOutQueueSampler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeQueue{}
		for i := range 40 {
			f.values = append(f.values, int64(i))
		}
		start := time.Now()
		q, err := NewOutQueue(queueConfig(1000), f, start) // 20 samples per 1s
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- RunOutQueueSampler(ctx, q) }()

		time.Sleep(time.Second)
		synctest.Wait()
		r, err := q.Collect(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		// Samples 0..19 at 50ms, 100ms, ..., 1s.
		if r.Samples != 20 || r.MeanBytes != 9.5 || r.MaxBytes != 19 || r.Elapsed != time.Second {
			t.Errorf("first period = %+v, want 20 samples of mean 9.5 bytes, max 19, over 1s", r)
		}
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("RunOutQueueSampler returned %v, want context.Canceled", err)
		}
		r, err = q.Collect(time.Now())
		if err != nil || r.Samples != 10 || r.MeanBytes != 24.5 {
			t.Errorf("second period = %+v, %v; want 10 samples of mean 24.5", r, err)
		}
		if since := time.Since(start); since != 1500*time.Millisecond {
			t.Errorf("fake clock advanced %v, want 1.5s", since)
		}
	})
}

// qt0 is the start of the scripted timelines of the outgoing-queue and
// bandwidth tests.
var qt0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
