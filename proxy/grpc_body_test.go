// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"strings"
	"testing"
	"time"

	testpb "google.golang.org/grpc/interop/grpc_testing"
)

// The body deadlines hold for an HTTP/2 stream as for HTTP/1 (there a
// timer of the body's own watches them): a client stream whose messages
// keep coming lives longer than read_body_timeout, one that stalls is cut
// after about read_body_timeout.
func TestGRPCStreamBodyTimeout(t *testing.T) {
	_, url := startGRPCBackend(t)
	p := startProxy(t, listenerConfig("read_body_timeout: 300ms, read_body_min_rate: -1", url))
	tc, ctx := grpcThrough(t, p.addr, 10*time.Second)
	msg := &testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, 10)}}

	st, err := tc.StreamingInputCall(ctx)
	must(t, err)
	for range 8 { // 8 × 100 ms: longer than read_body_timeout, never a gap as long
		must(t, st.Send(msg))
		time.Sleep(100 * time.Millisecond)
	}
	res, err := st.CloseAndRecv()
	if err != nil || res.GetAggregatedPayloadSize() != 80 {
		t.Fatalf("a stream whose messages keep coming: %v, %d bytes", err, res.GetAggregatedPayloadSize())
	}

	st, err = tc.StreamingInputCall(ctx)
	must(t, err)
	must(t, st.Send(msg))
	start := time.Now()
	done := make(chan error, 1)
	go func() { // the stall: nothing more is sent; the proxy ends the call
		var m testpb.StreamingInputCallResponse
		done <- st.RecvMsg(&m)
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a stalled stream ended OK")
		}
		if el := time.Since(start); el < 250*time.Millisecond || el > 3*time.Second {
			t.Errorf("the stalled stream ended after %v, want about 300ms", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stalled stream was not cut")
	}
	eventually(t, "the stall counted as a body timeout", func() bool {
		return strings.Contains(p.metricsText(t), `proxy_client_refused_total{reason="body_timeout",status="408"} 1`)
	})
}
