// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"io"
	"strings"
	"testing"
)

func TestEventReader(t *testing.T) {
	stream := ": a comment\n\nid: b-1\ndata: {\"seq\":1,\"boot\":\"b\"}\n\nid: b-2\ndata: {\"seq\":2,\"boot\":\"b\"}\n\nid: b-3\ndata: {not json\n\n"
	er := NewEventReader(strings.NewReader(stream))
	for want := uint64(1); want <= 2; want++ {
		id, s, err := er.Next()
		if err != nil || s.Seq != want || s.Boot != "b" || id != "b-"+string(rune('0'+want)) {
			t.Fatalf("event %d: %q %+v %v", want, id, s, err)
		}
	}
	if _, _, err := er.Next(); err == nil || err == io.EOF {
		t.Errorf("a sample that does not decode: %v, want a decoding error", err)
	}
	if _, _, err := er.Next(); err != io.EOF {
		t.Errorf("the end of the stream: %v, want io.EOF", err)
	}
}
