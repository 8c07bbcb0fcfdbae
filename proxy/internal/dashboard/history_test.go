// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/stage"
)

// A page opened late gets the whole kept history through the handler,
// from sealed blocks and the tail, in order and in pieces, then the live
// samples.
func TestUIEventsLongBacklog(t *testing.T) {
	r := serve(t, &fakeView{st: everySection(time.Now())}, Options{})
	h := r.d.hist
	now := time.Now()
	taken := HistoryLen + historyBlock + 10
	for i := range taken {
		r.d.SampleAt(now.Add(time.Duration(i) * time.Second))
	}
	_, next := openEvents(t, r.url+"/ui/events", nil)
	for want := uint64(taken - HistoryLen + 1); want <= uint64(taken); want++ {
		ev, err := next()
		must(t, err)
		if ev.data.Seq != want || ev.id != h.boot+"-"+strconv.FormatUint(want, 10) || len(ev.data.Stages) == 0 {
			t.Fatalf("event for %d: id %q, sample %d with %d stages", want, ev.id, ev.data.Seq, len(ev.data.Stages))
		}
	}
	r.d.SampleAt(now.Add(time.Duration(taken) * time.Second))
	ev, err := next()
	must(t, err)
	if ev.data.Seq != uint64(taken+1) {
		t.Fatalf("the live sample has seq %d, want %d", ev.data.Seq, taken+1)
	}
	// What it holds is exported.
	body := get(t, r.url+"/metrics")
	if want := "proxy_ui_history_bytes " + strconv.FormatFloat(h.size(), 'g', -1, 64); !strings.Contains(body, want+"\n") {
		t.Errorf("/metrics lacks %q", want)
	}
}

// The ring keeps HistoryLen samples: older ones are dropped and a viewer
// asking from before them gets what is kept.
func TestHistoryRing(t *testing.T) {
	h := newHistory()
	for i := 1; i <= HistoryLen+5; i++ {
		h.push([]byte{byte(i)})
	}
	out, from, _, closed := h.since(0)
	if len(out) != HistoryLen || from != 6 || out[0][0] != 6 || closed {
		t.Fatalf("kept %d from %d (first byte %d), closed %v", len(out), from, out[0][0], closed)
	}
	out, from, _, _ = h.since(HistoryLen + 3)
	if len(out) != 2 || from != HistoryLen+4 {
		t.Fatalf("after %d: %d from %d", HistoryLen+3, len(out), from)
	}
	_, _, wake, _ := h.since(HistoryLen + 5)
	h.close()
	select {
	case <-wake:
	default:
		t.Fatal("close did not wake the viewers")
	}
	if _, _, _, closed := h.since(0); !closed {
		t.Fatal("not closed after close")
	}
}

// push stores an encoded sample that carries no decisions.
func (h *history) push(b []byte) { h.pushSample(b, nil) }

// histSample is a sample-sized stand-in that names its own seq, with the
// repetition of real samples (same keys, mostly the same values).
func histSample(seq int) []byte {
	return []byte(`{"seq":` + strconv.Itoa(seq) + `,"stages":[{"name":"default","controller":"auto",` +
		strings.Repeat(`"numbers":{"concurrency.in_flight":7,"limit":12},`, 40) + `"x":` + strconv.Itoa(seq%7) + `}]}`)
}

// Every resume point, across sealed blocks and the uncompressed tail and
// while blocks leave the window, gets exactly the samples after it, each
// labelled with its own seq.
func TestHistoryBlocksResume(t *testing.T) {
	h := newHistory()
	check := func(next int) {
		t.Helper()
		first := max(1, next-HistoryLen)
		// Each edge: the start, the window's first sample, every block
		// boundary, the newest.
		seqs := []int{0, 1, first - 2, first - 1, first, first + 1, next - 2, next - 1}
		for b := 1; b < next; b += historyBlock {
			seqs = append(seqs, b-1, b, b+1)
		}
		for _, seq := range seqs {
			if seq < 0 || seq >= next {
				continue
			}
			out, from, _, _ := h.since(uint64(seq))
			want := max(seq+1, first)
			if int(from) != want || len(out) != next-want {
				t.Fatalf("next %d, since %d: %d samples from %d, want %d from %d", next, seq, len(out), from, next-want, want)
			}
			for i, b := range out {
				if !bytes.Equal(b, histSample(want+i)) {
					t.Fatalf("next %d, since %d: sample %d is %.40q", next, seq, want+i, b)
				}
			}
		}
	}
	next := 1
	for _, upto := range []int{historyBlock, historyBlock + 1, HistoryLen, HistoryLen + 1, HistoryLen + historyBlock + 1, 2*HistoryLen + 7} {
		for ; next <= upto; next++ {
			h.push(histSample(next))
		}
		check(next)
	}
	if n := len(h.blocks); n > HistoryLen/historyBlock {
		t.Errorf("%d blocks kept, want at most %d", n, HistoryLen/historyBlock)
	}
}

// The full history takes a fraction of its samples' size: sealed blocks
// are compressed.
func TestHistoryIsCompressed(t *testing.T) {
	h := newHistory()
	raw := 0
	for i := 1; i <= HistoryLen; i++ {
		b := histSample(i)
		raw += len(b)
		h.push(b)
	}
	held := int(h.size())
	if held == 0 || held*3 > raw {
		t.Errorf("the history holds %d bytes for %d bytes of samples, want under a third", held, raw)
	}
}

// shownDecisions replays samples as the page does: each stage's decisions
// (and the policer's, key "") appended in order, the newest
// uiDecisionsShown kept.
func shownDecisions(t *testing.T, samples [][]byte) (map[string][]string, int) {
	t.Helper()
	shown, carried := map[string][]string{}, 0
	add := func(key string, ds []stage.DecisionState) {
		for _, d := range ds {
			shown[key] = append(shown[key], d.Reason)
			carried++
		}
		if a := shown[key]; len(a) > uiDecisionsShown {
			shown[key] = a[len(a)-uiDecisionsShown:]
		}
	}
	for _, b := range samples {
		var smp Sample
		must(t, json.Unmarshal(b, &smp))
		for _, st := range smp.Stages {
			add(st.Name, st.Decisions)
		}
		if smp.Policer != nil {
			add("", smp.Policer.Decisions)
		}
	}
	return shown, carried
}

// Sealed samples lose only the decisions no viewer shows: from every
// resume point, a viewer ends up showing the same decisions as with every
// sample kept as sent, while the history carries far fewer of them.
func TestHistoryDropsOnlyUnshownDecisions(t *testing.T) {
	h := newHistory()
	var sent [][]byte // every sample as sent, from seq 1
	dec := func(seq, j int, who string) stage.DecisionState {
		return stage.DecisionState{At: time.Unix(int64(seq), int64(j)), Reason: fmt.Sprintf("%s %d.%d", who, seq, j)}
	}
	const n = 4*historyBlock + 17
	for seq := 1; seq <= n; seq++ {
		smp := &Sample{Seq: uint64(seq), Stages: []SampleStage{{Name: "busy"}, {Name: "calm"}}, Policer: &SamplePolicer{}}
		busy := 10 // a busy stage: 10 a second, then quiet, then 2 a second
		switch {
		case seq > 2*historyBlock+20:
			busy = 2
		case seq > historyBlock+30:
			busy = 0
		}
		for j := range busy {
			smp.Stages[0].Decisions = append(smp.Stages[0].Decisions, dec(seq, j, "busy"))
		}
		if seq%7 == 0 {
			smp.Stages[1].Decisions = []stage.DecisionState{dec(seq, 0, "calm")}
		}
		if seq%13 == 0 {
			smp.Policer.Decisions = []stage.DecisionState{dec(seq, 0, "policer")}
		}
		b, err := json.Marshal(smp)
		must(t, err)
		sent = append(sent, b)
		h.pushSample(b, decisionCounts(smp))
	}
	_, all := shownDecisions(t, sent)
	for _, seq := range []int{0, 1, 30, historyBlock - 1, historyBlock + 29, historyBlock + 31, 2 * historyBlock, 3*historyBlock + 5, n - 2} {
		out, from, _, _ := h.since(uint64(seq))
		if int(from) != seq+1 || len(out) != n-seq {
			t.Fatalf("since %d: %d samples from %d", seq, len(out), from)
		}
		got, carried := shownDecisions(t, out)
		want, _ := shownDecisions(t, sent[seq:])
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("since %d: the page would show\n%v\nwant\n%v", seq, got, want)
		}
		if seq == 0 && carried*3 > all {
			t.Errorf("the history carries %d of the %d decisions sent, want under a third", carried, all)
		}
	}
}

// The page keeps the newest uiDecisionsShown decisions per stage, the
// number sealing relies on to drop older ones.
func TestPageShowsUIDecisionsShown(t *testing.T) {
	page, err := uiFiles.ReadFile("ui/index.html")
	must(t, err)
	m := regexp.MustCompile(`a\.length > (\d+)\) a\.splice`).FindAllSubmatch(page, -1)
	if len(m) != 2 {
		t.Fatalf("the page's decision lists: %d found, want 2 (stages and policer)", len(m))
	}
	for _, x := range m {
		if string(x[1]) != strconv.Itoa(uiDecisionsShown) {
			t.Errorf("the page keeps %s decisions, uiDecisionsShown is %d", x[1], uiDecisionsShown)
		}
	}
}

// Sealing re-encodes a sample through Sample: every field of one taken
// from a view with every section and every field set (stages, pool,
// policer, rules, sensors, shares, decisions) survives byte for byte,
// and only the named stages lose their decisions. (A real proxy's
// sample: the proxy's TestSampleReencodesExactly.)
func TestSampleReencodesExactly(t *testing.T) {
	now := time.Now()
	v := &fakeView{st: everySection(now)}
	d := New(v, Options{})
	h := d.hist
	for i := range 3 {
		v.step(now.Add(time.Duration(i) * time.Second))
		d.SampleAt(now.Add(time.Duration(i) * time.Second))
	}
	out, _, _, _ := h.since(0)
	b := out[len(out)-1]
	var smp Sample
	must(t, json.Unmarshal(b, &smp))
	if smp.Policer == nil || smp.Shares == nil || len(smp.Resources) == 0 || len(smp.Sensors) == 0 || len(smp.Stages) < 2 ||
		smp.Stages[1].Name != "web" || len(smp.Stages[0].Decisions) == 0 || smp.Policer.Last == nil || smp.Stages[0].Numbers == nil {
		t.Fatalf("the sample lacks a section: %s", b)
	}
	smp.Stages[1].Decisions = []stage.DecisionState{{At: now, Old: 1, New: 0.5, ClassRates: []float64{1, 2}, Quality: 0.5, GateOff: true, Acted: true, Reason: "r"}}
	smp.Policer.Decisions = []stage.DecisionState{{At: now, Reason: "p"}}
	b, err := json.Marshal(&smp)
	must(t, err)
	same, err := withoutDecisions(b, nil)
	must(t, err)
	if !bytes.Equal(same, b) {
		t.Fatalf("re-encoded:\n%s\nsent:\n%s", same, b)
	}
	less, err := withoutDecisions(b, []string{"web"})
	must(t, err)
	var got Sample
	must(t, json.Unmarshal(less, &got))
	if got.Stages[1].Decisions != nil || len(got.Stages[0].Decisions) == 0 || len(got.Policer.Decisions) != 1 {
		t.Fatalf("without web's decisions: %s", less)
	}
}

// Viewers reading while the sampler pushes across block boundaries always
// see consecutive samples labelled with their seq (run with -race).
func TestHistoryConcurrentViewers(t *testing.T) {
	h := newHistory()
	done := make(chan struct{})
	errs := make(chan string, 4)
	for range 4 {
		go func() {
			defer func() { errs <- "" }()
			seq := uint64(0)
			for {
				out, from, wake, closed := h.since(seq)
				for i, b := range out {
					if !bytes.Equal(b, histSample(int(from)+i)) {
						errs <- "sample " + strconv.Itoa(int(from)+i) + " mislabelled"
						return
					}
				}
				if len(out) > 0 {
					seq = from + uint64(len(out)) - 1
				}
				if closed {
					return
				}
				select {
				case <-wake:
				case <-done:
					return
				}
			}
		}()
	}
	for i := 1; i <= 3*HistoryLen; i++ {
		h.push(histSample(i))
	}
	h.close()
	close(done)
	for range 4 {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
}
