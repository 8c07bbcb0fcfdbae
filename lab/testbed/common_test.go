// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseQuality(t *testing.T) {
	tests := []struct {
		value   string
		present bool
		want    float64
		wantErr bool
	}{
		{present: false, want: 1},
		{value: "", present: true, want: 1},
		{value: "0.5", present: true, want: 0.5},
		{value: " 0 ", present: true, want: 0},
		{value: "1", present: true, want: 1},
		{value: "1.5", present: true, wantErr: true},
		{value: "-0.1", present: true, wantErr: true},
		{value: "NaN", present: true, wantErr: true},
		{value: "high", present: true, wantErr: true},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.present {
			h.Set(QualityHeader, tt.value)
		}
		got, err := ParseQuality(h)
		if tt.wantErr {
			if err == nil || !strings.Contains(err.Error(), QualityHeader) {
				t.Errorf("ParseQuality(%q) err = %v, want an error naming the header", tt.value, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseQuality(%q) = %v, %v; want %v", tt.value, got, err, tt.want)
		}
	}
	if got := EffectiveQuality(0); got != MinQuality {
		t.Errorf("EffectiveQuality(0) = %v, want %v", got, MinQuality)
	}
	if got := EffectiveQuality(0.7); got != 0.7 {
		t.Errorf("EffectiveQuality(0.7) = %v", got)
	}
}

func TestCheckListenAddr(t *testing.T) {
	tests := []struct {
		addr   string
		public bool
		ok     bool
	}{
		{"127.0.0.1:8081", false, true},
		{"127.3.4.5:0", false, true},
		{"[::1]:8081", false, true},
		{"localhost:8081", false, true},
		{":8081", false, false},
		{"0.0.0.0:8081", false, false},
		{"10.1.2.3:80", false, false},
		{"example.com:80", false, false},
		{"0.0.0.0:8081", true, true},
		{"127.0.0.1", false, false},
		{"127.0.0.1:http", false, false},
		{"127.0.0.1:70000", false, false},
	}
	for _, tt := range tests {
		err := CheckListenAddr(tt.addr, tt.public)
		if (err == nil) != tt.ok {
			t.Errorf("CheckListenAddr(%q, %v) = %v, want ok=%v", tt.addr, tt.public, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), tt.addr) {
			t.Errorf("error %q does not name the address %q", err, tt.addr)
		}
	}
}

func TestBusyWindow(t *testing.T) {
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var w busyWindow
	w.init(time.Second) // boundaries every 100 ms
	steps := []struct {
		at    float64
		level float64 // new level set at this time (-1: only read)
		want  float64 // mean read at this time
	}{
		{0, 1, 0},      // nothing elapsed yet
		{0.5, -1, 1},   // busy since the start
		{0.5, 0, 1},    // idle from 0.5 s
		{1.0, -1, 0.5}, // 0.5 busy of 1.0 s
		// Ten boundaries (0.1..1.0 s) are not yet eleven: the window still
		// starts at the first observation.
		{1.05, -1, 0.5 / 1.05},
		// Eleven boundaries: the window starts at 0.1 s, busy 0.4 s of 1.0 s.
		{1.1, -1, 0.4},
		// Busy again from 5 s after a long idle gap (skipped boundaries).
		{5, 1, 0},
		// Window from 4.5 s: busy 0.5 s of 1.0 s.
		{5.5, -1, 0.5},
		// Window from 4.6 s: busy 0.65 s of 1.05 s.
		{5.65, -1, 0.65 / 1.05},
	}
	for i, s := range steps {
		if s.level >= 0 {
			w.set(sec(s.at), s.level)
		}
		if got := w.mean(sec(s.at)); math.Abs(got-s.want) > 1e-9 {
			t.Fatalf("step %d at %.2fs: mean = %v, want %v", i, s.at, got, s.want)
		}
	}
	// Time going backwards is ignored.
	if got := w.mean(sec(2)); math.Abs(got-0.65/1.05) > 1e-9 {
		t.Fatalf("mean with an earlier now = %v, want unchanged %v", got, 0.65/1.05)
	}
}
