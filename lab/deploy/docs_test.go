// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/strvals"
	"sigs.k8s.io/yaml"
)

// The sections of docs/operations.md whose commands and values this
// package checks.
var docSections = []string{"## Kubernetes (Helm)", "## Autoscaling", "## Alerts"}

// block is a fenced code block of the documentation.
type block struct {
	lang, text string
	line       int
}

// docBlocks returns the code blocks of the sections, and the sections'
// text.
func docBlocks(t *testing.T) ([]block, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var blocks []block
	var text strings.Builder
	in, fence := false, -1
	var lang string
	var body []string
	for i, l := range lines {
		if strings.HasPrefix(l, "## ") {
			in = false
			for _, s := range docSections {
				in = in || l == s
			}
		}
		if !in {
			continue
		}
		text.WriteString(l + "\n")
		switch {
		case strings.HasPrefix(l, "```") && fence < 0:
			fence, lang, body = i, strings.TrimPrefix(l, "```"), nil
		case strings.HasPrefix(l, "```"):
			blocks = append(blocks, block{lang, strings.Join(body, "\n") + "\n", fence + 1})
			fence = -1
		case fence >= 0:
			body = append(body, l)
		}
	}
	if len(blocks) < 6 {
		t.Fatalf("%d code blocks in %v of docs/operations.md", len(blocks), docSections)
	}
	return blocks, text.String()
}

// docRun is what the documented commands have made so far.
type docRun struct {
	files    map[string]string   // values files written in the docs
	releases map[string]*objects // namespace/release: what helm made
	secrets  map[string]string   // Secrets kubectl created: name -> key
	metric   string              // the HPA's metric
}

// TestOperationsDocCommands runs, or renders, every command of the
// Kubernetes, Autoscaling and Alerts sections of docs/operations.md:
// helm with this chart renders it with the documented values (and
// decodes every object); kubectl's commands are checked against what
// that rendered (the Secret, key, Deployment and port they name); the
// adapter's values are the file in deploy/prometheus; promtool runs. A
// command this test does not know fails it.
func TestOperationsDocCommands(t *testing.T) {
	blocks, _ := docBlocks(t)
	r := &docRun{files: map[string]string{}, releases: map[string]*objects{}, secrets: map[string]string{}}
	for _, b := range blocks {
		where := fmt.Sprintf("docs/operations.md:%d", b.line)
		switch b.lang {
		case "yaml":
			r.yamlBlock(t, where, b.text)
		case "sh":
			for _, cmd := range strings.Split(strings.TrimSpace(b.text), "\n") {
				r.command(t, where, cmd)
			}
		default:
			t.Errorf("%s: a %q block: give it a language (sh or yaml) this test checks", where, b.lang)
		}
	}
}

func (r *docRun) yamlBlock(t *testing.T, where, text string) {
	if name, ok := strings.CutPrefix(strings.SplitN(text, "\n", 2)[0], "# "); ok {
		r.files[name] = text
		return
	}
	// The adapter's rule: the values file, without its comments.
	var doc, file any
	want, err := os.ReadFile(filepath.Join(root, "deploy/prometheus/prometheus-adapter.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if yaml.Unmarshal([]byte(text), &doc) != nil || yaml.Unmarshal(want, &file) != nil || !reflect.DeepEqual(doc, file) {
		t.Errorf("%s: this YAML is neither a named values file (# NAME) nor deploy/prometheus/prometheus-adapter.yaml", where)
	}
}

func (r *docRun) command(t *testing.T, where, cmd string) {
	t.Helper()
	for _, part := range strings.Split(cmd, " | ") {
		args := shellWords(t, part)
		switch {
		case len(args) == 0:
		case args[0] == "helm":
			r.helm(t, where, args)
		case args[0] == "kubectl":
			r.kubectl(t, where, args)
		case args[0] == "promtool":
			// TestAlertRules runs these.
			if !slices.ContainsFunc(promtoolRuns, func(run []string) bool { return slices.Equal(run, args[1:]) }) {
				t.Errorf("%s: %s is not one of the promtool runs of TestAlertRules %v", where, cmd, promtoolRuns)
			}
		case part == "base64 -d":
		default:
			t.Errorf("%s: %q is not a command this test checks: teach it, or leave it out", where, part)
		}
	}
}

// helm install|upgrade --install|template NAME CHART [flags].
func (r *docRun) helm(t *testing.T, where string, args []string) {
	var pos []string
	opts := Options{Namespace: "default", KubeVersion: "1.31.0", Values: map[string]any{}}
	var files []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		next := func() string {
			i++
			if i >= len(args) {
				t.Fatalf("%s: %s needs a value", where, a)
			}
			return args[i]
		}
		switch a {
		case "install", "template", "upgrade", "--install":
		case "--namespace", "-n":
			opts.Namespace = next()
		case "--kube-version":
			opts.KubeVersion = next()
		case "-f", "--values":
			files = append(files, next())
		case "--set":
			if err := strvals.ParseInto(next(), opts.Values); err != nil {
				t.Fatalf("%s: --set: %v", where, err)
			}
		default:
			if strings.HasPrefix(a, "-") {
				t.Fatalf("%s: helm flag %s is not checked here", where, a)
			}
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		t.Fatalf("%s: helm %v: want NAME CHART", where, args[1:])
	}
	opts.Release = pos[0]
	if pos[1] != ChartDir {
		// Another project's chart: its values file must be ours.
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(root, f)); err != nil {
				t.Errorf("%s: %s: %v", where, f, err)
			}
		}
		return
	}
	vals := map[string]any{}
	for _, f := range files {
		text, ok := r.files[f]
		if !ok {
			b, err := os.ReadFile(filepath.Join(root, f))
			if err != nil {
				t.Fatalf("%s: -f %s: neither a file of the repository nor one the docs write", where, f)
			}
			text = string(b)
		}
		var v map[string]any
		if err := yaml.Unmarshal([]byte(text), &v); err != nil {
			t.Fatalf("%s: %s: %v", where, f, err)
		}
		mergeValues(vals, v)
	}
	mergeValues(vals, opts.Values)
	opts.Values = vals
	ms, _, err := loadChart(t).Render(opts)
	if err != nil {
		t.Fatalf("%s: helm %s: %v", where, strings.Join(args[1:], " "), err)
	}
	o, err := decode(ms)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	for _, h := range o.hpas {
		r.metric = h.Spec.Metrics[0].Pods.Metric.Name
	}
	r.releases[opts.Namespace+"/"+opts.Release] = o
}

// mergeValues merges src into dst as helm merges -f files and --set.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

var (
	jsonpathData = regexp.MustCompile(`^\{\.data\.([A-Za-z0-9_.-]+)\}$`)
	rawMetric    = regexp.MustCompile(`^/apis/custom\.metrics\.k8s\.io/v1beta1/namespaces/[a-z0-9-]+/pods/\*/([a-z_]+)$`)
)

func (r *docRun) kubectl(t *testing.T, where string, args []string) {
	ns, rest := "default", []string{}
	for i := 1; i < len(args); i++ {
		if args[i] == "--namespace" || args[i] == "-n" {
			i++
			ns = args[i]
			continue
		}
		rest = append(rest, args[i])
	}
	release := func(pred func(*objects) bool) bool {
		for k, o := range r.releases {
			if strings.HasPrefix(k, ns+"/") && pred(o) {
				return true
			}
		}
		return false
	}
	switch {
	case len(rest) == 5 && rest[0] == "get" && rest[1] == "secret" && rest[3] == "-o" && strings.HasPrefix(rest[4], "jsonpath="):
		m := jsonpathData.FindStringSubmatch(strings.TrimPrefix(rest[4], "jsonpath="))
		if m == nil || !release(func(o *objects) bool { s := o.secret(rest[2]); return s != nil && len(s.Data[m[1]]) >= 16 }) {
			t.Errorf("%s: no release in %s has a Secret %s with a token at %s", where, ns, rest[2], rest[4])
		}
	case len(rest) == 3 && rest[0] == "port-forward" && strings.HasPrefix(rest[1], "deploy/"):
		name := strings.TrimPrefix(rest[1], "deploy/")
		if !release(func(o *objects) bool {
			for _, d := range o.deployments {
				spec := d.Spec.Template.Spec
				for _, c := range append(spec.InitContainers, spec.Containers...) {
					for _, p := range c.Ports {
						if d.Name == name && fmt.Sprint(p.ContainerPort) == rest[2] {
							return true
						}
					}
				}
			}
			return false
		}) {
			t.Errorf("%s: no Deployment %s in %s listens on %s", where, name, ns, rest[2])
		}
	case len(rest) == 5 && rest[0] == "create" && rest[1] == "secret" && rest[2] == "generic":
		name, lit := rest[3], rest[4]
		key, value, ok := strings.Cut(strings.TrimPrefix(lit, "--from-literal="), "=")
		if !ok || !strings.HasPrefix(lit, "--from-literal=") || value != `$(openssl rand -hex 16)` {
			t.Errorf("%s: kubectl create secret %v: want --from-literal=KEY=\"$(openssl rand -hex 16)\"", where, rest)
		}
		r.secrets[name] = key
	case len(rest) == 3 && rest[0] == "apply" && rest[1] == "-f":
		b, err := os.ReadFile(filepath.Join(root, rest[2]))
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var ms []Manifest
		for i, doc := range strings.Split(string(b), "\n---\n") {
			if i > 0 {
				ms = append(ms, Manifest{Source: rest[2], Content: doc})
			}
		}
		o, err := decode(ms)
		if err != nil || len(o.deployments) != 1 {
			t.Fatalf("%s: %s: %v", where, rest[2], err)
		}
		for _, v := range o.deployments[0].Spec.Template.Spec.Volumes {
			if v.Secret == nil {
				continue
			}
			if key, ok := r.secrets[v.Secret.SecretName]; !ok || len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != key {
				t.Errorf("%s: %s mounts Secret %s %v, not the one the docs create (%v)", where, rest[2], v.Secret.SecretName, v.Secret.Items, r.secrets)
			}
		}
	case len(rest) == 3 && rest[0] == "get" && rest[1] == "--raw":
		m := rawMetric.FindStringSubmatch(rest[2])
		if m == nil || r.metric == "" || m[1] != r.metric {
			t.Errorf("%s: kubectl get --raw %s: the chart's HPA scales on %q", where, rest[2], r.metric)
		}
	default:
		t.Errorf("%s: kubectl %v is not a command this test checks", where, args[1:])
	}
}

// shellWords splits a command line as sh does for these commands: words
// separated by spaces, '...' and "..." quoting (what is inside stays
// literal, $(...) included).
func shellWords(t *testing.T, s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case '\'', '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				t.Fatalf("unterminated quote in %q", s)
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// TestOperationsDocValues: the table of values in docs/operations.md
// states each default as values.yaml has it, and names only values that
// exist.
func TestOperationsDocValues(t *testing.T) {
	_, text := docBlocks(t)
	defaults, err := ReadValues(filepath.Join(root, ChartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Defaults stated as phrases, and what each says.
	phrases := map[string]func(any) bool{
		"one `auto` stage, SLO 500ms": func(v any) bool {
			st, _ := v.(map[string]any)["stages"].([]any)
			return len(st) == 1 && reflect.DeepEqual(st[0].(map[string]any)["controller"], "auto") &&
				reflect.DeepEqual(st[0].(map[string]any)["params"], map[string]any{"slo": "500ms"})
		},
		"one SLO: every stage, 0.5 s, 0.999": func(v any) bool {
			s, _ := v.([]any)
			return len(s) == 1 && reflect.DeepEqual(s[0], map[string]any{"name": "default", "stages": ".+", "latency": "0.5", "objective": 0.999})
		},
	}
	row := regexp.MustCompile("(?m)^\\| `([a-zA-Z.]+)` \\| ([^|]+) \\|")
	rows := row.FindAllStringSubmatch(text, -1)
	if len(rows) < 20 {
		t.Fatalf("%d rows in the values table", len(rows))
	}
	used := map[string]bool{}
	for _, m := range rows {
		key, stated := m[1], strings.TrimSpace(m[2])
		v, ok := lookup(defaults, key)
		if !ok {
			if strings.HasPrefix(key, "Sluice") {
				continue // the alerts' table
			}
			t.Errorf("%s: not in values.yaml", key)
			continue
		}
		switch lit, isLit := strings.CutPrefix(stated, "`"); {
		case stated == "none":
			if v != nil && v != "" {
				t.Errorf("%s: stated none, values.yaml has %v", key, v)
			}
		case isLit:
			var want any
			if err := yaml.Unmarshal([]byte(strings.TrimSuffix(lit, "`")), &want); err != nil || !reflect.DeepEqual(want, v) {
				t.Errorf("%s: stated %s, values.yaml has %#v", key, stated, v)
			}
		case phrases[stated] != nil:
			used[stated] = true
			if !phrases[stated](v) {
				t.Errorf("%s: stated %q, values.yaml has %#v", key, stated, v)
			}
		default:
			t.Errorf("%s: default %q is neither a literal nor a phrase this test checks", key, stated)
		}
	}
	for p := range maps.Keys(phrases) {
		if !used[p] {
			t.Errorf("phrase %q is stated nowhere", p)
		}
	}
}

// lookup finds a dotted path in values.
func lookup(v map[string]any, path string) (any, bool) {
	var cur any = v
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}
