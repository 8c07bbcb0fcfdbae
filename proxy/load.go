package proxy

import (
	"errors"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/strictyaml"
)

// ConfigError is an error in a configuration file, located by line and
// field path: "proxy.yaml:14: stages[1].params.target: -1s is invalid:
// must be a positive duration".
type ConfigError struct {
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

func (e *ConfigError) Error() string {
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

// LoadFile reads, decodes, defaults and validates the configuration file
// at path. Every error is a *ConfigError naming the file, line and field.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{File: path, Msg: err.Error()}
	}
	return Parse(path, data)
}

// Parse decodes data (the contents of the file called name) strictly:
// unknown keys and durations without a unit are errors. It then sets the
// defaults and validates. Every error is a *ConfigError.
func Parse(name string, data []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(name, err, nil)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &ConfigError{File: name, Msg: "the file is empty: listeners and backends are required"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &ConfigError{File: name, Line: root.Line, Msg: "the top level must be a mapping (listeners:, backends:, stages: ...)"}
	}
	lines := map[int]string{}
	if err := strictyaml.Check(root, reflect.TypeOf(Config{}), "", lines); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return nil, &ConfigError{File: name, Line: lineOf(root, fe.Path), Path: fe.Path, Msg: fe.Msg}
		}
		return nil, &ConfigError{File: name, Msg: err.Error()}
	}
	var cfg Config
	if err := root.Decode(&cfg); err != nil {
		return nil, yamlError(name, err, lines)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, locate(name, root, err)
	}
	return &cfg, nil
}

// LocateError places an error about a loaded configuration (a
// *FieldError from Listen, such as an address that cannot be bound) in
// its file: the result is a *ConfigError naming the file, the line of the
// field and the field. Other errors, and a file that cannot be read
// again, get the file name only.
func LocateError(file string, err error) error {
	var root *yaml.Node
	if data, rerr := os.ReadFile(file); rerr == nil {
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) == nil && len(doc.Content) > 0 {
			root = doc.Content[0]
		}
	}
	return locate(file, root, err)
}

// locate turns a validation error into a *ConfigError with the line of
// its path in root (root may be nil for configs built without a file).
func locate(name string, root *yaml.Node, err error) error {
	path, msg, line, ok := fieldPath(err)
	if !ok {
		return &ConfigError{File: name, Msg: err.Error()}
	}
	if line == 0 && root != nil {
		line = lineOf(root, path)
	}
	return &ConfigError{File: name, Line: line, Path: path, Msg: msg}
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlError converts a yaml.v3 syntax or type error into a *ConfigError
// (the first error, with its line and, when known, the field path).
func yamlError(name string, err error, lines map[int]string) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if m := yamlLine.FindStringSubmatch(strings.TrimSpace(msg)); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &ConfigError{File: name, Line: line, Path: lines[line], Msg: m[2]}
	}
	return &ConfigError{File: name, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// lineOf returns the line of the deepest node of root on path ("a.b[2].c");
// a path that leaves the document (a default value) gets the line of the
// last node it reached.
func lineOf(root *yaml.Node, path string) int {
	n := root
	line := root.Line
	for _, seg := range splitPath(path) {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
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
