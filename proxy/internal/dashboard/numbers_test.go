// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/stage"
)

// jsonNumbers is what the page's numbers are defined as: the finite
// numeric leaves of v's JSON form, by dotted path, leaving out the
// top-level keys in skip, a path ending in elapsed_ns given in
// milliseconds as …elapsed_ms; nil when there are none or v has no JSON
// form (a NaN or an infinity). The dashboard computed them this way
// until it read typed values; the typed functions must agree with it.
func jsonNumbers(v any, skip map[string]bool) map[string]float64 {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil
	}
	out := map[string]float64{}
	var walk func(prefix string, x any)
	walk = func(prefix string, x any) {
		switch x := x.(type) {
		case float64:
			if !math.IsNaN(x) && !math.IsInf(x, 0) {
				out[prefix] = x
			}
		case map[string]any:
			for k, v := range x {
				if prefix == "" && skip[k] {
					continue
				}
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, v)
			}
		}
	}
	walk("", m)
	for k := range out {
		if strings.HasSuffix(k, "elapsed_ns") {
			out[strings.TrimSuffix(k, "elapsed_ns")+"elapsed_ms"] = out[k] / 1e6
			delete(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// stageJSONNumbers is stageNumbers by its definition: the entry without
// its classes and decisions, and without setting, quality and class
// rates.
func stageJSONNumbers(st stage.State) map[string]float64 {
	st.Classes, st.Decisions = nil, nil
	return jsonNumbers(st, map[string]bool{"setting": true, "quality": true, "class_rates": true})
}

// fill sets v (addressable) and every exported field in it, recursively,
// to a value of its own (numbers counting up from *n, strings, true,
// one-element slices, two-entry maps, pointers to filled values), so
// that a field added to a type shows up in its JSON form.
func fill(v reflect.Value, n *float64) {
	*n++
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n) * 1000003) // time.Duration: a few ms
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n) * 7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(*n + 0.25)
	case reflect.String:
		v.SetString("s" + strings.Repeat("x", int(*n)%5))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), n)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), n)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for _, k := range []string{"a", "b_elapsed_ns"} {
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e, n)
			m.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1_700_000_000+int64(*n), 0).UTC()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	}
}

func filled[T any]() T {
	var x T
	n := 0.0
	fill(reflect.ValueOf(&x).Elem(), &n)
	return x
}

func sameNumbers(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: numbers\n%v\nwant (its JSON form's)\n%v", what, got, want)
	}
}

// The numbers a sample carries are those of the JSON form of the typed
// values, for values with every field set, with some unset, and with a
// number that is not finite; a field added to stage.State, stage.Period
// or PolicerPeriod and not to the functions fails here.
func TestNumbersAreTheJSONForms(t *testing.T) {
	st := filled[stage.State]()
	sameNumbers(t, "a stage with every field", stageNumbers(&st), stageJSONNumbers(st))
	if len(stageNumbers(&st)) < 6 {
		t.Fatalf("a stage with every field has only %v", stageNumbers(&st))
	}
	bare := stage.State{Name: "s", Setting: 3, Quality: 1}
	sameNumbers(t, "a stage without a limit or estimates", stageNumbers(&bare), stageJSONNumbers(bare))
	est := stage.State{Estimates: map[string]float64{"limit": 5}}
	sameNumbers(t, "a stage with estimates only", stageNumbers(&est), stageJSONNumbers(est))
	for _, bad := range []func(*stage.State){
		func(s *stage.State) { s.Setting = math.NaN() },
		func(s *stage.State) { s.Quality = math.Inf(1) },
		func(s *stage.State) { s.ClassRates = []float64{1, math.NaN()} },
		func(s *stage.State) { s.InFlightLimited.Drain = math.Inf(-1) },
		func(s *stage.State) { s.Estimates["a"] = math.NaN() },
	} {
		s := filled[stage.State]()
		bad(&s)
		sameNumbers(t, "a stage with a number not finite", stageNumbers(&s), stageJSONNumbers(s))
	}

	p := filled[stage.Period]()
	sameNumbers(t, "a period with every field", periodNumbers(&p), jsonNumbers(p, nil))
	p.Utilization = nil
	sameNumbers(t, "a period without utilization", periodNumbers(&p), jsonNumbers(p, nil))
	p.P90MS = math.NaN()
	sameNumbers(t, "a period with a NaN", periodNumbers(&p), jsonNumbers(p, nil))

	pp := filled[PolicerPeriod]()
	sameNumbers(t, "a policer period with every field", policerNumbers(&pp), jsonNumbers(pp, nil))
	pp.Utilization = nil
	sameNumbers(t, "a policer period without utilization", policerNumbers(&pp), jsonNumbers(pp, nil))
	pp.Queue = math.Inf(1)
	sameNumbers(t, "a policer period with an infinity", policerNumbers(&pp), jsonNumbers(pp, nil))
}

func BenchmarkNumbers(b *testing.B) {
	st := everySection(time.Now()).Stages[0]
	b.ReportAllocs()
	for b.Loop() {
		stageNumbers(&st.State)
		periodNumbers(st.Classes[0].Last)
	}
}
