// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/policy"
)

// HotelRecord is one call a hotel service took into its worker queue.
type HotelRecord struct {
	API string
	// Request is the index of its user request (x-lab-request; −1:
	// none).
	Request int
	// Arrival, Start and Finish: it entered the worker queue, a worker
	// took it, its work was done.
	Arrival, Start, Finish time.Time
	// CPU is the CPU time its work burnt.
	CPU time.Duration
	// Deadline is its context's (zero: none).
	Deadline time.Time
	// Gone says its context had ended when its work was done.
	Gone bool
}

// hotelRecordHeader is the CSV header of Records; times are Unix
// nanoseconds (0: none).
var hotelRecordHeader = []string{"api", "request", "arrival_ns", "start_ns", "finish_ns", "cpu_ns", "deadline_ns", "gone"}

// maxHotelRecords bounds a service's records (about 100 bytes each).
const maxHotelRecords = 4 << 20

type hotelRecorder struct {
	mu      sync.Mutex
	recs    []HotelRecord
	dropped int
}

func (r *hotelRecorder) add(x HotelRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recs) >= maxHotelRecords {
		r.dropped++
		return
	}
	r.recs = append(r.recs, x)
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// WriteHotelRecords writes records as CSV.
func WriteHotelRecords(w io.Writer, recs []HotelRecord) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(hotelRecordHeader); err != nil {
		return err
	}
	for _, x := range recs {
		if err := cw.Write([]string{x.API, strconv.Itoa(x.Request), strconv.FormatInt(unixNano(x.Arrival), 10),
			strconv.FormatInt(unixNano(x.Start), 10), strconv.FormatInt(unixNano(x.Finish), 10),
			strconv.FormatInt(int64(x.CPU), 10), strconv.FormatInt(unixNano(x.Deadline), 10), strconv.FormatBool(x.Gone)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ParseHotelRecords reads what WriteHotelRecords wrote.
func ParseHotelRecords(r io.Reader) ([]HotelRecord, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(hotelRecordHeader)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("hotel records: %w", err)
	}
	if strings.Join(head, ",") != strings.Join(hotelRecordHeader, ",") {
		return nil, fmt.Errorf("hotel records: header %q, want %q", strings.Join(head, ","), strings.Join(hotelRecordHeader, ","))
	}
	var out []HotelRecord
	for line := 2; ; line++ {
		f, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("hotel records: %w", err)
		}
		var n [5]int64
		for i, k := range []int{2, 3, 4, 5, 6} {
			if n[i], err = strconv.ParseInt(f[k], 10, 64); err != nil {
				return nil, fmt.Errorf("hotel records: line %d: %s=%q: %w", line, hotelRecordHeader[k], f[k], err)
			}
		}
		req, err1 := strconv.Atoi(f[1])
		gone, err2 := strconv.ParseBool(f[7])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("hotel records: line %d: request %q, gone %q", line, f[1], f[7])
		}
		out = append(out, HotelRecord{API: f[0], Request: req, Arrival: fromUnixNano(n[0]), Start: fromUnixNano(n[1]),
			Finish: fromUnixNano(n[2]), CPU: time.Duration(n[3]), Deadline: fromUnixNano(n[4]), Gone: gone})
	}
}

// requestIndex reads a call's x-lab-request (−1: none or malformed).
func requestIndex(ctx context.Context) int {
	v := metadata.ValueFromIncomingContext(ctx, HotelRequestMD)
	if len(v) == 0 {
		return -1
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// The control service's methods, full names.
const (
	HotelRecordsMethod = "/" + hotelControl + "/Records"
	HotelScaleMethod   = "/" + hotelControl + "/Scale"
	HotelBusyMethod    = "/" + hotelControl + "/Busy"
)

// controlDesc is hotel.Control's descriptor: Records (Empty →
// BytesValue, the CSV), Scale (StringValue "API=FACTOR", API empty for
// every API → Empty) and Busy (Empty → DoubleValue, the workers' busy
// seconds so far).
func (s *HotelService) controlDesc() *grpc.ServiceDesc {
	method := func(name string, in func() any, h func(ctx context.Context, in any) (any, error)) grpc.MethodDesc {
		return grpc.MethodDesc{MethodName: name, Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			x := in()
			if err := dec(x); err != nil {
				return nil, err
			}
			if ic == nil {
				return h(ctx, x)
			}
			return ic(ctx, x, &grpc.UnaryServerInfo{Server: s, FullMethod: "/" + hotelControl + "/" + name}, h)
		}}
	}
	return &grpc.ServiceDesc{ServiceName: hotelControl, HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{
		method("Records", func() any { return new(emptypb.Empty) }, func(context.Context, any) (any, error) {
			s.rec.mu.Lock()
			recs := append([]HotelRecord(nil), s.rec.recs...)
			s.rec.mu.Unlock()
			var b bytes.Buffer
			if err := WriteHotelRecords(&b, recs); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
			return wrapperspb.Bytes(b.Bytes()), nil
		}),
		method("Scale", func() any { return new(wrapperspb.StringValue) }, func(_ context.Context, in any) (any, error) {
			api, f, err := ParseHotelScale(in.(*wrapperspb.StringValue).GetValue())
			if err != nil {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
			s.scale.Store(api, f)
			return new(emptypb.Empty), nil
		}),
		method("Busy", func() any { return new(emptypb.Empty) }, func(context.Context, any) (any, error) {
			return wrapperspb.Double(time.Duration(s.busy.Load()).Seconds()), nil
		}),
	}}
}

// ParseHotelScale reads "API=FACTOR" (API empty: every API), FACTOR a
// number in (0, 1000].
func ParseHotelScale(v string) (string, float64, error) {
	api, fs, ok := strings.Cut(v, "=")
	f, err := strconv.ParseFloat(fs, 64)
	if !ok || err != nil || math.IsNaN(f) || f <= 0 || f > 1000 {
		return "", 0, fmt.Errorf("scale %q: want API=FACTOR, FACTOR in (0, 1000]", v)
	}
	return api, f, nil
}

// LoadHotelServiceConfig reads a hotel service's configuration: the JSON
// file config (HotelServiceConfig's fields; unknown ones are errors), in
// sluice mode the policy YAML policyFile, in a peer's mode the peer's
// configuration YAML peerFile.
func LoadHotelServiceConfig(config, policyFile, peerFile string) (HotelServiceConfig, error) {
	var cfg HotelServiceConfig
	data, err := os.ReadFile(config)
	if err != nil {
		return cfg, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", config, err)
	}
	switch cfg.Mode {
	case HotelNone:
	case HotelSluice:
		if policyFile == "" {
			return cfg, fmt.Errorf("%s: mode sluice needs a policy file", config)
		}
		pc, err := policy.Load(policyFile)
		if err != nil {
			return cfg, err
		}
		cfg.Policy = *pc
	default:
		if peerFile == "" {
			return cfg, fmt.Errorf("%s: mode %q needs the peer's configuration file", config, cfg.Mode)
		}
		b, err := os.ReadFile(peerFile)
		if err != nil {
			return cfg, err
		}
		if cfg.Peer, err = DecodeHotelPeer(cfg.Mode, peerFile, b); err != nil {
			return cfg, err
		}
	}
	return cfg, cfg.Validate()
}
