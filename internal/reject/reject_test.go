// SPDX-License-Identifier: Apache-2.0

package reject

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// want is what one reason's answer is in each protocol.
type want struct {
	status      int    // HTTP status
	retryAfter  string // Retry-After, "" for none
	body        string // HTTP body
	code        int32  // grpc-status
	message     string // grpc-message
	retryInfo   bool   // grpc-status-details-bin carries RetryInfo{RetryAfter}
	pushback    string // grpc-retry-pushback-ms
	extraHeader string // an HTTP header the reason adds, with any value
}

// TestAnswers writes every reason in both protocols and checks the
// answer byte for byte: the HTTP status, headers and body, and the gRPC
// trailers-only status, message, details and pushback.
func TestAnswers(t *testing.T) {
	const ra = 2500 * time.Millisecond
	cases := []struct {
		a    Answer
		want want
	}{
		{Answer{Reason: Overloaded, Stage: "api", Class: "bulk", RetryAfter: ra},
			want{503, "3", "sluice: overloaded (stage api, class bulk): retry after 3 s\n",
				8, "sluice: overloaded (stage api, class bulk): retry after 2.5s", true, "2500", ""}},
		{Answer{Reason: EarlyDiscard, RetryAfter: ra},
			want{503, "3", "sluice: the request's deadline passes before it can be served\n",
				4, "sluice: the call's deadline passes before it can be served", false, "", ""}},
		{Answer{Reason: PoolFull, RetryAfter: 2 * time.Second},
			want{503, "2", "sluice: backend pool saturated: wait queue full\n",
				8, "sluice: backend pool saturated (queue_full)", true, "2000", ""}},
		{Answer{Reason: PoolTimeout, RetryAfter: time.Second, Detail: "250ms"},
			want{503, "1", "sluice: backend pool saturated: no server slot within 250ms\n",
				8, "sluice: backend pool saturated (queue_timeout)", true, "1000", ""}},
		{Answer{Reason: PoolDeadline},
			want{504, "", "sluice: the request's deadline passed while it waited for a backend\n",
				4, "sluice: the call's deadline passed while it waited for a backend", false, "", ""}},
		{Answer{Reason: ClientShare, RetryAfter: 300 * time.Millisecond, Detail: "no_slot"},
			want{503, "1", "sluice: client bandwidth share exceeded (no_slot)\n",
				8, "sluice: client bandwidth share exceeded (no_slot)", true, "300", ""}},
		{Answer{Reason: Hog, RetryAfter: time.Second, Detail: "request cancelled in service: hog"},
			want{503, "1", "sluice: request cancelled in service: hog\n",
				8, "sluice: request cancelled in service: hog", false, "", ""}},
		{Answer{Reason: HandlerDeadline},
			want{504, "", "sluice: the request's deadline passed before its handler answered\n",
				4, "sluice: the call's deadline passed before its handler answered", false, "", ""}},
		{Answer{Reason: Limit, Status: 431, Detail: "12 header lines, more than 10"},
			want{431, "", "sluice: 12 header lines, more than 10\n",
				8, "sluice: 12 header lines, more than 10", false, NoRetry, "X-Content-Type-Options"}},
	}
	if len(cases) != int(numReasons) {
		t.Fatalf("%d cases for %d reasons", len(cases), numReasons)
	}
	for _, c := range cases {
		t.Run(c.a.Reason.String()+"/http", func(t *testing.T) { checkHTTP(t, c.a, c.want) })
		t.Run(c.a.Reason.String()+"/grpc", func(t *testing.T) { checkGRPC(t, c.a, c.want) })
	}
}

func checkHTTP(t *testing.T, a Answer, w want) {
	rec := httptest.NewRecorder()
	Write(rec, httptest.NewRequest(http.MethodGet, "/", nil), HTTP, a)
	h := rec.Header()
	if rec.Code != w.status || rec.Body.String() != w.body {
		t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body.String(), w.status, w.body)
	}
	if got := h.Get("Retry-After"); got != w.retryAfter {
		t.Errorf("Retry-After %q, want %q", got, w.retryAfter)
	}
	wantHeaders := map[string]string{"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store",
		"Content-Length": lenString(w.body)}
	if w.retryAfter != "" {
		wantHeaders["Retry-After"] = w.retryAfter
	}
	if w.extraHeader != "" {
		wantHeaders[w.extraHeader] = h.Get(w.extraHeader)
		if h.Get(w.extraHeader) == "" {
			t.Errorf("no %s", w.extraHeader)
		}
	}
	for k, v := range wantHeaders {
		if h.Get(k) != v {
			t.Errorf("%s %q, want %q", k, h.Get(k), v)
		}
	}
	if len(h) != len(wantHeaders) {
		t.Errorf("headers %v, want exactly %v", h, wantHeaders)
	}
}

func checkGRPC(t *testing.T, a Answer, w want) {
	rec := httptest.NewRecorder()
	Write(rec, httptest.NewRequest(http.MethodPost, "/pkg.S/M", nil), GRPC, a)
	h := rec.Header()
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("got %d with %d body bytes, want a trailers-only 200", rec.Code, rec.Body.Len())
	}
	if h.Get("Content-Type") != "application/grpc" || h.Get("Grpc-Status") != itoa(w.code) ||
		h.Get("Grpc-Message") != w.message || h.Get("Grpc-Retry-Pushback-Ms") != w.pushback {
		t.Errorf("headers %v, want grpc-status %d, message %q, pushback %q", h, w.code, w.message, w.pushback)
	}
	bin := h.Get("Grpc-Status-Details-Bin")
	if !w.retryInfo {
		if bin != "" {
			t.Errorf("details %q, want none", bin)
		}
		return
	}
	// The details are what the generated google.rpc types marshal to.
	info, err := anypb.New(&errdetails.RetryInfo{RetryDelay: durationpb.New(a.RetryAfter)})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := proto.Marshal(&spb.Status{Code: w.code, Message: w.message, Details: []*anypb.Any{info}})
	if err != nil {
		t.Fatal(err)
	}
	if bin != base64.RawStdEncoding.EncodeToString(ref) {
		t.Errorf("details %q, want %q", bin, base64.RawStdEncoding.EncodeToString(ref))
	}
}

// TestDetailsDecode reads the details back with the generated types, for
// retry delays with and without whole seconds and nanoseconds.
func TestDetailsDecode(t *testing.T) {
	for _, d := range []time.Duration{0, time.Nanosecond, 999 * time.Millisecond, 3 * time.Second, 90*time.Second + 7} {
		st := Status{Code: CodeResourceExhausted, Message: "m", RetryInfo: true, RetryAfter: d}
		var got spb.Status
		if err := proto.Unmarshal(st.details(), &got); err != nil {
			t.Fatalf("%v: %v", d, err)
		}
		var info errdetails.RetryInfo
		if len(got.Details) != 1 || got.Details[0].UnmarshalTo(&info) != nil || info.RetryDelay.AsDuration() != d ||
			got.Code != CodeResourceExhausted || got.Message != "m" {
			t.Errorf("%v: decoded %v", d, &got)
		}
	}
}

// TestHead leaves the body out of a HEAD request's answer but keeps its
// length.
func TestHead(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, httptest.NewRequest(http.MethodHead, "/", nil), HTTP, Answer{Reason: PoolFull, RetryAfter: time.Second})
	if rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != lenString("sluice: backend pool saturated: wait queue full\n") {
		t.Errorf("HEAD: %d body bytes, Content-Length %q", rec.Body.Len(), rec.Header().Get("Content-Length"))
	}
}

// TestOverride writes a caller's own status, type and body (a policy's
// reject section) with the reason's Retry-After.
func TestOverride(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, httptest.NewRequest(http.MethodGet, "/", nil), HTTP,
		Answer{Reason: Overloaded, RetryAfter: 4 * time.Second, Status: 429, ContentType: "application/json", Body: []byte("{}")})
	if rec.Code != 429 || rec.Body.String() != "{}" || rec.Header().Get("Content-Type") != "application/json" ||
		rec.Header().Get("Retry-After") != "4" {
		t.Errorf("got %d %q %v", rec.Code, rec.Body.String(), rec.Header())
	}
}

// TestProtocolOf tells a gRPC call from an HTTP request.
func TestProtocolOf(t *testing.T) {
	for _, c := range []struct {
		major int
		ctype string
		want  Protocol
	}{
		{2, "application/grpc", GRPC}, {2, "application/grpc+proto", GRPC}, {2, "application/grpc;x=y", GRPC},
		{1, "application/grpc", HTTP}, {2, "application/grpcx", HTTP}, {2, "", HTTP}, {2, "text/plain", HTTP},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.ProtoMajor = c.major
		if c.ctype != "" {
			r.Header.Set("Content-Type", c.ctype)
		}
		if got := ProtocolOf(r); got != c.want {
			t.Errorf("HTTP/%d %q: %v, want %v", c.major, c.ctype, got, c.want)
		}
	}
}

// TestMessageEncoding percent-encodes what grpc-message may not carry.
func TestMessageEncoding(t *testing.T) {
	if got := encodeMessage("50% é\n"); got != "50%25 %C3%A9%0A" {
		t.Errorf("got %q", got)
	}
}

func lenString(s string) string { return strconv.Itoa(len(s)) }

func itoa(n int32) string { return strconv.Itoa(int(n)) }
