// SPDX-License-Identifier: Apache-2.0

// Package lru is a fixed-capacity map that replaces its least recently
// used entry, for state kept per client address (the connection
// policer's per-source buckets, client shares' address cache). Entries
// live in one slice, grown up to the capacity and then reused, linked into
// a recency list by index: a hit, an insertion into a full map and an
// eviction allocate nothing, and with pointer-free keys and values the
// garbage collector has nothing in it to scan.
package lru

// Map is a map of at most Cap entries. The zero Map is not usable; call
// New. A Map is not safe for concurrent use: its callers hold their own
// lock.
type Map[K comparable, V any] struct {
	capacity   int
	index      map[K]int32
	ents       []entry[K, V]
	head, tail int32 // most and least recently used; -1 when empty
}

type entry[K comparable, V any] struct {
	key        K
	val        V
	prev, next int32
}

// New returns an empty Map of capacity entries (at least 1); hint bounds
// the memory allocated up front (the map grows to capacity on demand).
func New[K comparable, V any](capacity, hint int) *Map[K, V] {
	capacity = max(capacity, 1)
	hint = min(max(hint, 0), capacity)
	return &Map[K, V]{capacity: capacity, index: make(map[K]int32, hint), ents: make([]entry[K, V], 0, hint), head: -1, tail: -1}
}

// Len returns the number of entries.
func (m *Map[K, V]) Len() int { return len(m.index) }

// Cap returns the capacity.
func (m *Map[K, V]) Cap() int { return m.capacity }

// Get returns a pointer to k's value, valid until the next call that
// changes the map, and makes k the most recently used; nil when k is
// absent.
func (m *Map[K, V]) Get(k K) *V {
	i, ok := m.index[k]
	if !ok {
		return nil
	}
	m.toFront(i)
	return &m.ents[i].val
}

// Put inserts k with value v, or sets k's value when it is present, and
// makes k the most recently used. When an insertion finds the map full it
// replaces the least recently used entry and returns that entry's key and
// value with evicted true. It returns a pointer to k's value, valid until
// the next call that changes the map.
func (m *Map[K, V]) Put(k K, v V) (val *V, oldKey K, oldVal V, evicted bool) {
	if i, ok := m.index[k]; ok {
		m.ents[i].val = v
		m.toFront(i)
		return &m.ents[i].val, oldKey, oldVal, false
	}
	var i int32
	if len(m.ents) < m.capacity {
		i = int32(len(m.ents))
		m.ents = append(m.ents, entry[K, V]{prev: -1, next: -1})
	} else {
		i = m.tail
		e := &m.ents[i]
		oldKey, oldVal, evicted = e.key, e.val, true
		delete(m.index, e.key)
		m.unlink(i)
	}
	m.ents[i].key, m.ents[i].val = k, v
	m.index[k] = i
	m.pushFront(i)
	return &m.ents[i].val, oldKey, oldVal, evicted
}

func (m *Map[K, V]) unlink(i int32) {
	e := &m.ents[i]
	if e.prev >= 0 {
		m.ents[e.prev].next = e.next
	} else {
		m.head = e.next
	}
	if e.next >= 0 {
		m.ents[e.next].prev = e.prev
	} else {
		m.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (m *Map[K, V]) pushFront(i int32) {
	e := &m.ents[i]
	e.prev, e.next = -1, m.head
	if m.head >= 0 {
		m.ents[m.head].prev = i
	}
	m.head = i
	if m.tail < 0 {
		m.tail = i
	}
}

func (m *Map[K, V]) toFront(i int32) {
	if m.head == i {
		return
	}
	m.unlink(i)
	m.pushFront(i)
}
