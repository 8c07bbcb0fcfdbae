// SPDX-License-Identifier: Apache-2.0

package httpx

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// closeCounter is a body that counts its Close calls and returns err.
type closeCounter struct {
	io.Reader
	closed int
	err    error
}

func (c *closeCounter) Close() error { c.closed++; return c.err }

// The wrapped body reads as the original; closing it closes the original,
// returns its error and ends the context.
func TestCancelOnClose(t *testing.T) {
	boom := errors.New("boom")
	body := &closeCounter{Reader: strings.NewReader("answer"), err: boom}
	ctx, cancel := context.WithCancel(context.Background())
	wrapped := CancelOnClose(body, cancel)
	if b, err := io.ReadAll(wrapped); err != nil || string(b) != "answer" {
		t.Fatalf("read %q, %v", b, err)
	}
	if ctx.Err() != nil {
		t.Fatal("the context ended before the body was closed")
	}
	if err := wrapped.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want the body's error", err)
	}
	if body.closed != 1 || ctx.Err() == nil {
		t.Fatalf("body closed %d times, context %v; want 1 and ended", body.closed, ctx.Err())
	}
}

// A request's body is closed; a request without one is left alone.
func TestCloseRequestBody(t *testing.T) {
	body := &closeCounter{Reader: strings.NewReader("x")}
	req, err := http.NewRequest("POST", "http://a.test/", body)
	if err != nil {
		t.Fatal(err)
	}
	CloseRequestBody(req)
	if body.closed != 1 {
		t.Fatalf("body closed %d times, want 1", body.closed)
	}
	get, err := http.NewRequest("GET", "http://a.test/", nil)
	if err != nil {
		t.Fatal(err)
	}
	CloseRequestBody(get) // no body: must not panic
}
