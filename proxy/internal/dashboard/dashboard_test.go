// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"context"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A sample is the view's state: its values as they are, the numbers of
// each stage and period, rates from the counters of two samples (a
// class's over the span between its period ends, the others' over the
// time between the samples), and the decisions taken since the previous
// sample.
func TestSampleFromView(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	v := &fakeView{st: everySection(t0)}
	d := New(v, Options{})
	first, _ := d.SampleAt(t0)
	if c := first.Stages[1].Classes[0]; c.Rates.Offered != 20 || c.Rates.Completed != 18 || c.Rates.Errors != 0 {
		t.Errorf("first sample: the rates of the last period alone (20 offered, 18 completed in 1 s), got %+v", c.Rates)
	}
	if first.Pool.Servers[0].ServedPS != 0 || first.Policer.OfferedPS != 0 {
		t.Errorf("first sample: no rate before a second sample, got pool %+v policer %+v", first.Pool, first.Policer)
	}
	t1 := t0.Add(2 * time.Second)
	v.step(t1)
	st := v.State(3 * sampleDecisions)
	smp, enc := d.SampleAt(t1.Add(500 * time.Millisecond))
	if enc == nil || smp.Seq != 2 || smp.Boot != d.hist.boot || smp.T != t1.Add(500*time.Millisecond).UnixMilli() {
		t.Fatalf("second sample: seq %d boot %q t %d, encoded %v", smp.Seq, smp.Boot, smp.T, enc != nil)
	}
	if smp.ConfigVersion != 3 || !smp.Shadow || smp.InFlight != 5 || smp.Streams != 1 || !smp.Token ||
		!reflect.DeepEqual(smp.Sensors, st.Sensors) || !reflect.DeepEqual(smp.Shares, st.Shares) {
		t.Errorf("sample does not carry the view's values: %+v", smp)
	}
	cgi, web := smp.Stages[0], smp.Stages[1]
	if cgi.Name != "cgi" || cgi.Objective != "target" || *cgi.Floor != 1 || cgi.TargetMS != 500 || cgi.Setting != 16 ||
		!reflect.DeepEqual(cgi.Numbers, stageNumbers(&st.Stages[0].State)) || cgi.Numbers["concurrency.in_flight"] != 3 {
		t.Errorf("stage cgi: %+v", cgi)
	}
	if web.Objective != "p90" || *web.Floor != 0.05 || web.TargetMS != 100 || !web.GateOff || web.Numbers != nil || len(web.Classes) != 2 {
		t.Errorf("stage web: %+v", web)
	}
	c := cgi.Classes[0]
	if c.Totals.Offered != 110 || c.Totals.Completed != 98 || c.Rates.Offered != 5 || c.Rates.Completed != 5 ||
		!reflect.DeepEqual(c.Last, periodNumbers(st.Stages[0].Classes[0].Last)) {
		t.Errorf("class: %+v, want 10 more offered and completed over the 2 s between the period ends", c)
	}
	if len(cgi.Decisions) != 1 || cgi.Decisions[0].At != t1 || len(web.Decisions) != 1 || len(smp.Policer.Decisions) != 1 {
		t.Errorf("decisions: %+v, %+v, %+v; want the one of each since the previous sample", cgi.Decisions, web.Decisions, smp.Policer.Decisions)
	}
	p := smp.Pool
	if p.Capacity != 8 || p.Queue != 2 || p.QueueMax != 1024 || p.QueueTimeout != "1s" || p.RejectedPS != 0 || p.WaitMS != 0 ||
		p.Servers[0].ServedPS != 4 || p.Servers[1].ServedPS != 4 || p.Servers[0].Limit != 4 {
		t.Errorf("pool: %+v, want 10 served in 2.5 s by each server", p)
	}
	pol := smp.Policer
	if pol.OfferedPS != 4 || pol.AdmittedPS != 4 || pol.RejectedPS != 0 || pol.LiveConns != 4 || pol.GuardError == "" ||
		!reflect.DeepEqual(pol.Last, policerNumbers(st.Policer.Last)) {
		t.Errorf("policer: %+v", pol)
	}
	if r := smp.Resources; len(r) != 2 || *r[0].Input != 0.5 || r[0].HitsPS != 10 || r[1].Input != nil || r[1].SensorError != "no reading" {
		t.Errorf("resources: %+v", r)
	}
	// The pool's waits: the mean wait of those that waited since.
	st = v.State(0)
	st.Pool.Rejected += 5
	st.Pool.Waited += 2
	st.Pool.WaitNS += 6e6
	v.set(st)
	smp, _ = d.SampleAt(t1.Add(time.Second))
	if p := smp.Pool; p.RejectedPS != 10 || p.WaitedPS != 4 || p.WaitMS != 3 {
		t.Errorf("pool: %+v, want 5 rejected and 2 waited in 0.5 s, 3 ms each", p)
	}
	for _, n := range v.asked {
		if n != 3*sampleDecisions && n != 0 {
			t.Errorf("the sampler asked for %d decisions", n)
		}
	}
}

// The event stream of a dashboard over a view: the page, then the kept
// history, each new sample as it is taken, and a resume after
// Last-Event-ID or ?since= (from the start for another process's id).
func TestEventsFromView(t *testing.T) {
	now := time.Now()
	r := serve(t, &fakeView{st: everySection(now)}, Options{})
	if body := get(t, r.url+"/ui"); !strings.Contains(body, "uPlot") || strings.Contains(body, "{{NONCE}}") {
		t.Fatalf("GET /ui: %.200s", body)
	}
	for i := range 3 {
		r.d.SampleAt(now.Add(time.Duration(i) * time.Second))
	}
	boot := r.d.hist.boot
	_, next := openEvents(t, r.url+"/ui/events", nil)
	var last sseEvent
	for want := uint64(1); want <= 3; want++ {
		ev, err := next()
		must(t, err)
		if ev.data.Seq != want || ev.id != boot+"-"+strconv.FormatUint(want, 10) || ev.data.Boot != boot || len(ev.data.Stages) != 2 {
			t.Fatalf("event %d: id %q, sample %d of %q", want, ev.id, ev.data.Seq, ev.data.Boot)
		}
		last = ev
	}
	r.d.SampleAt(now.Add(3 * time.Second))
	if ev, err := next(); err != nil || ev.data.Seq != 4 {
		t.Fatalf("the live sample: %d, %v", ev.data.Seq, err)
	}
	_, next2 := openEvents(t, r.url+"/ui/events", map[string]string{"Last-Event-ID": last.id})
	if ev, err := next2(); err != nil || ev.data.Seq != 4 {
		t.Errorf("resumed after 3: %d, %v", ev.data.Seq, err)
	}
	_, next3 := openEvents(t, r.url+"/ui/events?since=otherboot-3", nil)
	if ev, err := next3(); err != nil || ev.data.Seq != 1 {
		t.Errorf("another process's id: %d, %v; want the whole history from 1", ev.data.Seq, err)
	}
	// Run ends every stream when its context does.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.d.Run(ctx); close(done) }()
	if ev, err := next(); err != nil || ev.data.Seq != 5 {
		t.Fatalf("Run's first sample: %d, %v", ev.data.Seq, err)
	}
	cancel()
	<-done
	for {
		if _, err := next(); err != nil {
			break
		}
	}
}

// fakeAccess allows what allow says and counts its grants.
type fakeAccess struct {
	allow  map[bool]bool // by page
	grants int
}

func (a *fakeAccess) Allowed(_ *http.Request, page bool) bool { return a.allow[page] }
func (a *fakeAccess) Grant(w http.ResponseWriter) {
	a.grants++
	w.Header().Set("Set-Cookie", "granted=1")
}

// Access guards the page (401 with a Bearer challenge, in plain text)
// and the stream (401 through the Error hook); an allowed page is
// granted once; past MaxViewers the stream answers 503 through the hook.
func TestAccessAndErrors(t *testing.T) {
	acc := &fakeAccess{allow: map[bool]bool{}}
	var errs []string
	r := serve(t, &fakeView{st: everySection(time.Now())}, Options{Access: acc,
		Error: func(w http.ResponseWriter, status int, msg string) {
			errs = append(errs, strconv.Itoa(status)+" "+msg)
			w.WriteHeader(status)
		}})
	resp, err := client.Get(r.url + "/ui")
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || acc.grants != 0 {
		t.Errorf("denied page: %d %v, %d grants", resp.StatusCode, resp.Header, acc.grants)
	}
	resp, err = client.Get(r.url + "/ui/events")
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") ||
		len(errs) != 1 || !strings.HasPrefix(errs[0], "401 the dashboard's event stream needs the admin token") {
		t.Errorf("denied stream: %d %v, errors %q", resp.StatusCode, resp.Header, errs)
	}
	acc.allow[true] = true
	resp, err = client.Get(r.url + "/ui")
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 200 || acc.grants != 1 || resp.Header.Get("Set-Cookie") != "granted=1" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'nonce-") {
		t.Errorf("allowed page: %d %v, %d grants", resp.StatusCode, resp.Header, acc.grants)
	}
	acc.allow[false] = true
	viewers.Add(MaxViewers)
	resp, err = client.Get(r.url + "/ui/events")
	viewers.Add(-MaxViewers)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 503 || len(errs) != 2 || errs[1] != "503 too many dashboard viewers (at most 64)" {
		t.Errorf("past MaxViewers: %d, errors %q", resp.StatusCode, errs)
	}

	// Without Access every request may see it; without Error, errors
	// are plain text.
	r = serve(t, &fakeView{st: everySection(time.Now())}, Options{})
	viewers.Add(MaxViewers)
	resp, err = client.Get(r.url + "/ui/events")
	viewers.Add(-MaxViewers)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("past MaxViewers without Error: %d %v", resp.StatusCode, resp.Header)
	}
}

// The dashboard's one metric: what its history holds.
func TestHistoryBytesMetric(t *testing.T) {
	d := New(&fakeView{st: everySection(time.Now())}, Options{})
	reg := prometheus.NewRegistry()
	must(t, d.Register(reg))
	if n, err := testutil.GatherAndCount(reg, "proxy_ui_history_bytes"); err != nil || n != 1 {
		t.Fatalf("proxy_ui_history_bytes: %d series, %v", n, err)
	}
	before := testutil.ToFloat64(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, d.hist.size))
	d.SampleAt(time.Now())
	if after := testutil.ToFloat64(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, d.hist.size)); !(after > before) {
		t.Errorf("history bytes %v after a sample, %v before", after, before)
	}
}
