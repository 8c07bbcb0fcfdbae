// SPDX-License-Identifier: Apache-2.0

package httpx

import (
	"context"
	"io"
	"net/http"
)

// CloseRequestBody closes the body of a request that is not sent, as an
// http.RoundTripper must; a request without a body is left alone.
func CloseRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// CancelOnClose returns body wrapped so that closing it also calls cancel
// (after the body is closed): the context of one try, such as a per-try
// timeout, lives as long as its answer is read.
func CancelOnClose(body io.ReadCloser, cancel context.CancelFunc) io.ReadCloser {
	return &cancelBody{ReadCloser: body, cancel: cancel}
}

// cancelBody is CancelOnClose's body.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
