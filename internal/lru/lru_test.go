// SPDX-License-Identifier: Apache-2.0

package lru

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// keys returns the keys from most to least recently used, walking the
// list both ways to check its links.
func keys[K comparable, V any](t *testing.T, m *Map[K, V]) []K {
	t.Helper()
	var fwd, back []K
	for i := m.head; i >= 0; i = m.ents[i].next {
		fwd = append(fwd, m.ents[i].key)
	}
	for i := m.tail; i >= 0; i = m.ents[i].prev {
		back = append(back, m.ents[i].key)
	}
	slices.Reverse(back)
	if !slices.Equal(fwd, back) || len(fwd) != m.Len() {
		t.Fatalf("list forwards %v, backwards %v, index %d", fwd, back, m.Len())
	}
	return fwd
}

func TestMapRecencyAndEviction(t *testing.T) {
	m := New[string, int](3, 1)
	for i, k := range []string{"a", "b", "c"} {
		if _, _, _, ev := m.Put(k, i); ev {
			t.Fatalf("Put(%s) evicted below capacity", k)
		}
	}
	if got := keys(t, m); !slices.Equal(got, []string{"c", "b", "a"}) {
		t.Fatalf("order %v", got)
	}
	if v := m.Get("a"); v == nil || *v != 0 {
		t.Fatalf("Get(a) = %v", v)
	}
	*m.Get("b") = 10 // the pointer is the stored value
	if _, k, v, ev := m.Put("d", 3); !ev || k != "c" || v != 2 {
		t.Fatalf("Put(d) into a full map evicted %q=%d (%v), want c=2, the least recently used", k, v, ev)
	}
	if m.Get("c") != nil || m.Len() != 3 || m.Cap() != 3 {
		t.Fatalf("after eviction: c present %v, len %d", m.Get("c") != nil, m.Len())
	}
	if _, _, _, ev := m.Put("b", 11); ev || *m.Get("b") != 11 {
		t.Fatal("Put of a present key evicted or did not set")
	}
	if got := keys(t, m); !slices.Equal(got, []string{"b", "d", "a"}) {
		t.Fatalf("order %v", got)
	}
}

// Against a reference model: random operations on a small map keep the
// same contents and order as a slice kept in recency order.
func TestMapAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	m := New[int, int](8, 0)
	var model []int // keys, most recent first
	vals := map[int]int{}
	for step := range 20000 {
		k := r.IntN(20)
		at := slices.Index(model, k)
		if r.IntN(2) == 0 {
			v := m.Get(k)
			if (v != nil) != (at >= 0) {
				t.Fatalf("step %d: Get(%d) present %v, model %v", step, k, v != nil, at >= 0)
			}
			if at >= 0 {
				if *v != vals[k] {
					t.Fatalf("step %d: Get(%d) = %d, want %d", step, k, *v, vals[k])
				}
				model = append([]int{k}, slices.Delete(model, at, at+1)...)
			}
			continue
		}
		_, ok, ov, ev := m.Put(k, step)
		if at >= 0 {
			model = slices.Delete(model, at, at+1)
		} else if len(model) == 8 {
			last := model[7]
			if !ev || ok != last || ov != vals[last] {
				t.Fatalf("step %d: evicted %d=%d (%v), want %d", step, ok, ov, ev, last)
			}
			model = model[:7]
			delete(vals, last)
		}
		model = append([]int{k}, model...)
		vals[k] = step
		if got := keys(t, m); !slices.Equal(got, model) {
			t.Fatalf("step %d: %v, model %v", step, got, model)
		}
	}
}

func TestMapDoesNotAllocateWhenFull(t *testing.T) {
	m := New[[16]byte, uint16](64, 64)
	var k [16]byte
	for i := range 64 {
		k[0] = byte(i)
		m.Put(k, uint16(i))
	}
	n := testing.AllocsPerRun(1000, func() {
		k[1]++
		m.Put(k, 1)
		m.Get(k)
	})
	if n != 0 {
		t.Errorf("Put and Get on a full map allocate %v times", n)
	}
}

// A flood of distinct keys leaves at most the capacity behind, in a slice
// that did not grow past it.
func TestMapMemoryIsBounded(t *testing.T) {
	const capacity = 4096
	m := New[uint32, int64](capacity, 1024)
	for i := range uint32(1_000_000) {
		m.Put(i, int64(i))
	}
	if m.Len() != capacity || len(m.ents) != capacity || cap(m.ents) > 2*capacity || len(m.index) != capacity {
		t.Errorf("after 1,000,000 keys: len %d, entries %d (cap %d), index %d; want %d", m.Len(), len(m.ents), cap(m.ents), len(m.index), capacity)
	}
	if m.Get(999_999) == nil || m.Get(1_000_000-capacity-1) != nil {
		t.Error("not the most recent keys that stayed")
	}
}
