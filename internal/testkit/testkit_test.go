// SPDX-License-Identifier: Apache-2.0

package testkit

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

// The test helpers take a TB and are called with the test's *testing.T
// or a benchmark's *testing.B.
var (
	_ TB = (*testing.T)(nil)
	_ TB = (*testing.B)(nil)
)

var (
	_ io.Writer    = (*SyncBuffer)(nil)
	_ fmt.Stringer = (*SyncBuffer)(nil)
)

// TestSyncBufferConcurrent writes whole lines from several goroutines
// while another reads the buffer, and checks that every line arrives
// once and intact. Under -race an unguarded buffer fails as a data race
// every time; without -race, overlapping writes often (not always) lose
// or garble lines.
func TestSyncBufferConcurrent(t *testing.T) {
	const writers, lines = 8, 2000
	var (
		buf  SyncBuffer
		wg   sync.WaitGroup
		stop = make(chan struct{})
		read = make(chan struct{})
	)
	go func() {
		defer close(read)
		for {
			select {
			case <-stop:
				return
			default:
				if s := buf.String(); len(s) > 0 && !strings.HasPrefix(s, "w") {
					t.Errorf("buffer starts with %q, not a line", s[:1])
					return
				}
			}
		}
	}()
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(&buf, "w%d line %d\n", w, i)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-read

	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if seen[l] {
			t.Fatalf("line %q written twice", l)
		}
		seen[l] = true
	}
	for w := range writers {
		for i := range lines {
			if l := fmt.Sprintf("w%d line %d", w, i); !seen[l] {
				t.Fatalf("line %q missing (%d lines in all)", l, len(seen))
			}
		}
	}
	if len(seen) != writers*lines {
		t.Fatalf("%d lines, want %d", len(seen), writers*lines)
	}
}

// TestSyncBufferZero checks that the zero value is an empty buffer that
// takes writes.
func TestSyncBufferZero(t *testing.T) {
	var buf SyncBuffer
	if s := buf.String(); s != "" {
		t.Fatalf("zero value holds %q", s)
	}
	if n, err := buf.Write([]byte("ab")); n != 2 || err != nil {
		t.Fatalf("Write = %d, %v; want 2, nil", n, err)
	}
	if s := buf.String(); s != "ab" {
		t.Fatalf("String = %q, want %q", s, "ab")
	}
}
