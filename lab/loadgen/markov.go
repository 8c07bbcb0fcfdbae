// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/strictyaml"
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

// LoadMarkov reads and validates a Markov file (see Markov). Errors are
// *strictyaml.FileError, as the proxy's configuration reports them:
// "mail.yaml:7: transitions.inbox.read: weight -1 must be positive and
// finite".
func LoadMarkov(path string) (*Markov, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &strictyaml.FileError{File: path, Msg: err.Error()}
	}
	return ParseMarkov(path, data)
}

// ParseMarkov parses a Markov file's contents; name is the file's name in
// errors. Decoding is strict (unknown keys are errors) and every error
// names the file, the line and the field, as LoadMarkov's do.
func ParseMarkov(name string, data []byte) (*Markov, error) {
	var f markovFile
	root, err := strictyaml.DecodeFile(name, data, &f, `want "states", "start" and "transitions"`)
	if err != nil {
		return nil, err
	}
	m, err := f.compile()
	if err != nil {
		return nil, strictyaml.Locate(name, root, err)
	}
	return m, nil
}

// compile validates the file's contents and builds the chain. Errors are
// *sluice.FieldError naming the field.
func (f *markovFile) compile() (*Markov, error) {
	if len(f.States) == 0 {
		return nil, &sluice.FieldError{Path: "states", Msg: `no states (want a "states" map of name: URL)`}
	}
	m := &Markov{name: "markov"}
	index := map[string]int{}
	for s := range f.States {
		m.states = append(m.states, s)
	}
	sort.Strings(m.states)
	for i, s := range m.states {
		index[s] = i
		field := "states." + s
		if err := checkWorkloadURL(field, f.States[s]); err != nil {
			return nil, asField(field, err)
		}
		t, err := parseTemplate(field, f.States[s])
		if err != nil {
			return nil, asField(field, err)
		}
		m.urls = append(m.urls, t)
	}
	if f.Start == "" {
		return nil, &sluice.FieldError{Path: "start", Msg: "is missing (name of the first state of a session)"}
	}
	st, ok := index[f.Start]
	if !ok {
		return nil, &sluice.FieldError{Path: "start", Msg: fmt.Sprintf("%q is not a state", f.Start)}
	}
	m.start = st
	for from := range f.Transitions {
		if _, ok := index[from]; !ok {
			return nil, &sluice.FieldError{Path: "transitions." + from, Msg: fmt.Sprintf("%q is not a state", from)}
		}
	}
	m.rows = make([]picker, len(m.states))
	m.next = make([][]int, len(m.states))
	for i, from := range m.states {
		row, ok := f.Transitions[from]
		if !ok || len(row) == 0 {
			return nil, &sluice.FieldError{Path: "transitions", Msg: fmt.Sprintf("state %q has no transitions row", from)}
		}
		var tos []string
		for to := range row {
			tos = append(tos, to)
		}
		sort.Strings(tos)
		var ws []float64
		for _, to := range tos {
			p := "transitions." + from + "." + to
			j, ok := index[to]
			if !ok {
				return nil, &sluice.FieldError{Path: p, Msg: fmt.Sprintf("%q is not a state", to)}
			}
			w := row[to]
			if !(w > 0) || math.IsInf(w, 0) {
				return nil, &sluice.FieldError{Path: p, Msg: fmt.Sprintf("weight %v must be positive and finite", w)}
			}
			m.next[i] = append(m.next[i], j)
			ws = append(ws, w)
		}
		m.rows[i] = newPicker(ws)
	}
	return m, nil
}

// asField turns an error about field whose message starts with the field's
// name (checkWorkloadURL's and parseTemplate's) into a *sluice.FieldError.
func asField(field string, err error) error {
	return &sluice.FieldError{Path: field, Msg: strings.TrimPrefix(err.Error(), field+": ")}
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
