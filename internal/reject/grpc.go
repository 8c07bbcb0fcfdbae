// SPDX-License-Identifier: Apache-2.0

package reject

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// gRPC status codes sluice answers with.
const (
	CodeDeadlineExceeded  = 4
	CodeResourceExhausted = 8
)

// NoRetry is the grpc-retry-pushback-ms that forbids a retry (gRFC A6: a
// negative pushback).
const NoRetry = "-1"

// Status is a refusal as a gRPC status.
type Status struct {
	// Code is the gRPC status code: RESOURCE_EXHAUSTED (8) or
	// DEADLINE_EXCEEDED (4).
	Code int32
	// Message is the grpc-message, unencoded.
	Message string
	// RetryInfo asks for a google.rpc.RetryInfo detail carrying
	// RetryAfter.
	RetryInfo  bool
	RetryAfter time.Duration
	// Pushback is the grpc-retry-pushback-ms value, in milliseconds
	// (NoRetry: do not retry), or "" for none.
	Pushback string
}

// GRPC returns a's gRPC status. Overloaded, PoolFull, PoolTimeout and
// ClientShare carry RetryAfter as a RetryInfo and as the pushback; Limit
// carries NoRetry; the deadlines are DEADLINE_EXCEEDED.
func (a Answer) GRPC() Status {
	switch a.Reason {
	case Overloaded:
		return a.retryable("overloaded (stage " + a.Stage + ", class " + a.Class + "): retry after " + a.RetryAfter.String())
	case EarlyDiscard:
		return Status{Code: CodeDeadlineExceeded, Message: "sluice: the call's deadline passes before it can be served"}
	case PoolFull:
		return a.retryable("backend pool saturated (queue_full)")
	case PoolTimeout:
		return a.retryable("backend pool saturated (queue_timeout)")
	case PoolDeadline:
		return Status{Code: CodeDeadlineExceeded, Message: "sluice: the call's deadline passed while it waited for a backend"}
	case ClientShare:
		return a.retryable("client bandwidth share exceeded (" + a.Detail + ")")
	case Hog:
		return Status{Code: CodeResourceExhausted, Message: "sluice: " + a.Detail}
	case HandlerDeadline:
		return Status{Code: CodeDeadlineExceeded, Message: "sluice: the call's deadline passed before its handler answered"}
	}
	return Status{Code: CodeResourceExhausted, Message: "sluice: " + a.Detail, Pushback: NoRetry} // Limit
}

// retryable is RESOURCE_EXHAUSTED with msg, the RetryInfo and the
// pushback of a.RetryAfter.
func (a Answer) retryable(msg string) Status {
	return Status{Code: CodeResourceExhausted, Message: "sluice: " + msg, RetryInfo: true, RetryAfter: a.RetryAfter,
		Pushback: strconv.FormatInt(a.RetryAfter.Milliseconds(), 10)}
}

// WriteGRPC writes a trailers-only gRPC answer: HTTP 200 whose only
// header block carries grpc-status, grpc-message (percent-encoded as the
// protocol asks), the google.rpc.Status with its RetryInfo in
// grpc-status-details-bin when st asks for one, and
// grpc-retry-pushback-ms when st has a pushback.
func WriteGRPC(w http.ResponseWriter, st Status) {
	hd := w.Header()
	hd.Set("Content-Type", "application/grpc")
	hd.Set("Grpc-Status", strconv.Itoa(int(st.Code)))
	hd.Set("Grpc-Message", encodeMessage(st.Message))
	if st.RetryInfo {
		hd.Set("Grpc-Status-Details-Bin", base64.RawStdEncoding.EncodeToString(st.details()))
	}
	if st.Pushback != "" {
		hd.Set("Grpc-Retry-Pushback-Ms", st.Pushback)
	}
	w.WriteHeader(http.StatusOK)
}

// retryInfoType is the type URL of a google.rpc.RetryInfo in an Any.
const retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// details is st as a serialized google.rpc.Status { code, message,
// details: [Any(google.rpc.RetryInfo{retry_delay: RetryAfter})] }, in the
// protobuf wire format (fields in number order, zero values left out, as
// proto.Marshal writes them). It is written here rather than through the
// generated types so that the packages answering HTTP alone do not link
// them.
func (st Status) details() []byte {
	secs, nanos := int64(st.RetryAfter/time.Second), int64(st.RetryAfter%time.Second)
	var dur []byte
	if secs != 0 {
		dur = protowire.AppendTag(dur, 1, protowire.VarintType)
		dur = protowire.AppendVarint(dur, uint64(secs))
	}
	if nanos != 0 {
		dur = protowire.AppendTag(dur, 2, protowire.VarintType)
		dur = protowire.AppendVarint(dur, uint64(nanos))
	}
	var info []byte // RetryInfo { retry_delay = 1 }
	info = protowire.AppendTag(info, 1, protowire.BytesType)
	info = protowire.AppendBytes(info, dur)
	var anyMsg []byte // Any { type_url = 1; value = 2 }
	anyMsg = protowire.AppendTag(anyMsg, 1, protowire.BytesType)
	anyMsg = protowire.AppendString(anyMsg, retryInfoType)
	anyMsg = protowire.AppendTag(anyMsg, 2, protowire.BytesType)
	anyMsg = protowire.AppendBytes(anyMsg, info)
	var b []byte // Status { code = 1; message = 2; details = 3 }
	if st.Code != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(st.Code))
	}
	if st.Message != "" {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, st.Message)
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	return protowire.AppendBytes(b, anyMsg)
}

// encodeMessage percent-encodes what grpc-message may not carry raw (the
// gRPC over HTTP/2 protocol: printable ASCII but '%').
func encodeMessage(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(strconv.FormatUint(uint64(c)>>4, 16)+strconv.FormatUint(uint64(c)&15, 16)))
	}
	return b.String()
}
