// SPDX-License-Identifier: Apache-2.0

package strictyaml

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
)

// FileError is an error in a YAML file, located by line and field path:
// "proxy.yaml:14: stages[1].params.target: -1s is invalid: must be a
// positive duration". It is the one form every sluice file reader (the
// proxy's configuration, the lab's Markov workloads) reports.
type FileError struct {
	// File is the file name as given.
	File string
	// Line is the 1-based line of the offending field (0 if unknown).
	Line int
	// Path is the field path, e.g. "backends.servers[0].url" ("" if
	// unknown).
	Path string
	// Msg says what is wrong, with the bad value.
	Msg string
}

// Error returns "file:line: path: msg", leaving out what is unknown.
func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// DecodeFile decodes data, the contents of the file called name, into v (a
// pointer to a struct) strictly: unknown keys and durations without a unit
// are errors (see Check), as are an empty document and one whose top level
// is not a mapping; want says what the top level should hold, for those
// two messages ("listeners and backends are required"). It returns the
// top-level mapping, for placing later validation errors with Locate.
// Every error is a *FileError.
func DecodeFile(name string, data []byte, v any, want string) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fileError(name, DecodeError(err, "", nil))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &FileError{File: name, Msg: "the file is empty: " + want}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &FileError{File: name, Line: root.Line, Msg: "the top level must be a mapping: " + want}
	}
	lines := map[int]string{}
	if err := Check(root, reflect.TypeOf(v), "", lines); err != nil {
		return nil, Locate(name, root, err)
	}
	if err := root.Decode(v); err != nil {
		return nil, fileError(name, DecodeError(err, "", lines))
	}
	return root, nil
}

// ReadFile reads the file at path and hands its contents to parse, with
// path as the file's name: the Load of every sluice file (a proxy
// configuration, a policy). An error reading the file is a *FileError
// naming it; parse's errors are returned as they are.
func ReadFile[T any](path string, parse func(name string, data []byte) (T, error)) (T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var zero T
		return zero, &FileError{File: path, Msg: err.Error()}
	}
	return parse(path, data)
}

// ParseRoot returns the top-level node of data, or nil when data is not a
// YAML document with one; for Locate on a file read again.
func ParseRoot(data []byte) *yaml.Node {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	return doc.Content[0]
}

// Locate places err in the file called name: a *sluice.FieldError in its
// chain becomes a *FileError with its path and its line (its own, or its
// path's line in root when root is not nil: a value the file does not set
// gets the line of its nearest parent that it does); any other error
// becomes a *FileError with the file name only. A *FileError is returned
// as it is; nil stays nil.
func Locate(name string, root *yaml.Node, err error) error {
	if err == nil {
		return nil
	}
	var fe *FileError
	if errors.As(err, &fe) {
		return fe
	}
	var f *sluice.FieldError
	if !errors.As(err, &f) {
		return &FileError{File: name, Msg: err.Error()}
	}
	line := f.Line
	if line == 0 && root != nil {
		line = LineOf(root, f.Path)
	}
	return &FileError{File: name, Line: line, Path: f.Path, Msg: f.Msg}
}

// fileError is Locate for a decoding error, which carries its own line.
func fileError(name string, err error) error { return Locate(name, nil, err) }

// LineOf returns the line of the deepest node of root on path
// ("stages[2].params.target", the form of FieldError.Path); a path that
// leaves the document (a default value) gets the line of the last node it
// reached. Aliases are followed.
func LineOf(root *yaml.Node, path string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, seg := range splitPath(path) {
		n = resolve(n)
		if seg.key != "" {
			if n.Kind != yaml.MappingNode {
				return line
			}
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg.key {
					line = n.Content[i].Line
					next = n.Content[i+1]
					break
				}
			}
			if next == nil {
				return line
			}
			n = next
			continue
		}
		if n.Kind != yaml.SequenceNode || seg.index >= len(n.Content) {
			return line
		}
		n = n.Content[seg.index]
		line = n.Line
	}
	return line
}

type pathSeg struct {
	key   string
	index int
}

// splitPath splits "stages[1].params.target" into stages, [1], params,
// target.
func splitPath(path string) []pathSeg {
	var out []pathSeg
	for _, part := range strings.Split(path, ".") {
		for part != "" {
			i := strings.IndexByte(part, '[')
			if i < 0 {
				out = append(out, pathSeg{key: part})
				break
			}
			if i > 0 {
				out = append(out, pathSeg{key: part[:i]})
			}
			j := strings.IndexByte(part[i:], ']')
			if j < 0 {
				out = append(out, pathSeg{key: part[i:]})
				break
			}
			idx, err := strconv.Atoi(part[i+1 : i+j])
			if err != nil {
				out = append(out, pathSeg{key: part[i : i+j+1]})
			} else {
				out = append(out, pathSeg{index: idx})
			}
			part = part[i+j+1:]
		}
	}
	return out
}
