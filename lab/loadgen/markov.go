package loadgen

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"

	"gopkg.in/yaml.v3"
)

// Markov is a closed-loop navigation workload: each user walks a Markov
// chain whose states are URLs. The first request of a session is the start
// state; every following request is drawn from the current state's row of
// transition weights (rows are normalised by their sum).
//
// The file format (YAML, unknown keys are errors):
//
//	# states: name -> URL (a path relative to --target or an absolute
//	# loopback URL; {rand:A-B} is replaced by a random integer in [A,B]).
//	states:
//	  login: /login?user={rand:1-1000}
//	  inbox: /inbox
//	  read:  /read?msg={rand:1-500}
//	start: login
//	# transitions: from -> {to: weight, ...}; every state needs a row.
//	transitions:
//	  login: {inbox: 1}
//	  inbox: {read: 0.6, inbox: 0.3, login: 0.1}
//	  read:  {inbox: 1}
//
// Request types are the state names.
type Markov struct {
	name   string
	states []string
	urls   []urlTemplate
	start  int
	rows   []picker
	next   [][]int // next[i][k] is the state index of row i's k-th entry
}

type markovFile struct {
	States      map[string]string             `yaml:"states"`
	Start       string                        `yaml:"start"`
	Transitions map[string]map[string]float64 `yaml:"transitions"`
}

// LoadMarkov reads and validates a Markov file (see Markov). Errors name
// the file, the line where known, and the state.
func LoadMarkov(path string) (*Markov, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("markov file: %v", err)
	}
	return ParseMarkov(path, data)
}

// ParseMarkov parses a Markov file's contents; name is used in errors and
// as the workload name ("markov:NAME").
func ParseMarkov(name string, data []byte) (*Markov, error) {
	var f markovFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("markov file %s: %v", name, err)
	}
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root) // already decoded once; only for line numbers
	at := func(keys ...string) string {
		if l := lineOf(&root, keys...); l > 0 {
			return fmt.Sprintf("%s:%d", name, l)
		}
		return name
	}
	if len(f.States) == 0 {
		return nil, fmt.Errorf("markov file %s: no states (want a \"states\" map of name: URL)", name)
	}
	m := &Markov{name: "markov"}
	index := map[string]int{}
	for s := range f.States {
		m.states = append(m.states, s)
	}
	sort.Strings(m.states)
	for i, s := range m.states {
		index[s] = i
		field := fmt.Sprintf("markov file %s: states.%s", at("states", s), s)
		if err := checkWorkloadURL(field, f.States[s]); err != nil {
			return nil, err
		}
		t, err := parseTemplate(field, f.States[s])
		if err != nil {
			return nil, err
		}
		m.urls = append(m.urls, t)
	}
	if f.Start == "" {
		return nil, fmt.Errorf("markov file %s: \"start\" is missing (name of the first state of a session)", name)
	}
	st, ok := index[f.Start]
	if !ok {
		return nil, fmt.Errorf("markov file %s: start %q is not a state", at("start"), f.Start)
	}
	m.start = st
	for from := range f.Transitions {
		if _, ok := index[from]; !ok {
			return nil, fmt.Errorf("markov file %s: transitions.%s: %q is not a state", at("transitions", from), from, from)
		}
	}
	m.rows = make([]picker, len(m.states))
	m.next = make([][]int, len(m.states))
	for i, from := range m.states {
		row, ok := f.Transitions[from]
		if !ok || len(row) == 0 {
			return nil, fmt.Errorf("markov file %s: state %q has no transitions row", at("transitions"), from)
		}
		var tos []string
		for to := range row {
			tos = append(tos, to)
		}
		sort.Strings(tos)
		var ws []float64
		for _, to := range tos {
			j, ok := index[to]
			if !ok {
				return nil, fmt.Errorf("markov file %s: transitions.%s.%s: %q is not a state", at("transitions", from, to), from, to, to)
			}
			w := row[to]
			if !(w > 0) || math.IsInf(w, 0) {
				return nil, fmt.Errorf("markov file %s: transitions.%s.%s: weight %v must be positive and finite", at("transitions", from, to), from, to, w)
			}
			m.next[i] = append(m.next[i], j)
			ws = append(ws, w)
		}
		m.rows[i] = newPicker(ws)
	}
	return m, nil
}

// lineOf returns the line of the value at the mapping path keys, or 0.
func lineOf(n *yaml.Node, keys ...string) int {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, k := range keys {
		if n.Kind != yaml.MappingNode {
			return line
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				line = n.Content[i].Line
				n = n.Content[i+1]
				found = true
				break
			}
		}
		if !found {
			return line
		}
	}
	return line
}

// Name implements Workload.
func (m *Markov) Name() string { return m.name }

// NeedsBody implements Workload; Markov navigation ignores bodies.
func (m *Markov) NeedsBody() bool { return false }

// States returns the state names in index order (sorted).
func (m *Markov) States() []string { return append([]string(nil), m.states...) }

// NewSession implements Workload.
func (m *Markov) NewSession(*rand.Rand) Session { return &markovSession{m: m, cur: -1} }

type markovSession struct {
	m   *Markov
	cur int
}

func (s *markovSession) Next(r *rand.Rand) Request {
	if s.cur < 0 {
		s.cur = s.m.start
	} else {
		s.cur = s.m.next[s.cur][s.m.rows[s.cur].pick(r.Float64())]
	}
	return Request{Type: s.m.states[s.cur], URL: s.m.urls[s.cur].generate(r)}
}

func (s *markovSession) Observe(Request, int, []byte) {}
