// SPDX-License-Identifier: Apache-2.0

package secret_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/secret"
)

const canary = "canary-7f3e9b1d2c"

// Every way Go shows a value prints the placeholder, never the secret.
func TestStringNeverShown(t *testing.T) {
	s := secret.String(canary)
	type wrap struct {
		Token   secret.String            `yaml:"token" json:"token"`
		Headers map[string]secret.String `yaml:"headers" json:"headers"`
	}
	w := wrap{Token: s, Headers: map[string]secret.String{"api-key": s}}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T"} {
		out = append(out, fmt.Sprintf(verb, s), fmt.Sprintf(verb, w), fmt.Sprintf(verb, &w))
	}
	out = append(out, fmt.Sprint(s), fmt.Sprintln(w), s.String(), s.GoString())
	y, err := yaml.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	slog.New(slog.NewJSONHandler(&log, nil)).Info("x", "token", s, "cfg", w)
	slog.New(slog.NewTextHandler(&log, nil)).Info("x", "token", s, "cfg", w)
	out = append(out, string(y), string(j), log.String())
	for _, o := range out {
		if strings.Contains(o, canary) || strings.Contains(o, fmt.Sprintf("%x", canary)) {
			t.Fatalf("secret shown: %s", o)
		}
	}
	var back wrap
	if err := json.Unmarshal(j, &back); err != nil || back.Token.Reveal() != secret.Redacted || !strings.Contains(string(y), secret.Redacted) {
		t.Fatalf("placeholder missing: %s %s", y, j)
	}
	if s.Reveal() != canary {
		t.Fatalf("Reveal = %q", s.Reveal())
	}
	if secret.String("").String() != "" {
		t.Fatal("an unset secret must print as empty")
	}
}

// A secret decodes from YAML and JSON as the plain string.
func TestStringDecodes(t *testing.T) {
	var v struct {
		Token secret.String `yaml:"token" json:"token"`
	}
	if err := yaml.Unmarshal([]byte("token: "+canary), &v); err != nil || v.Token.Reveal() != canary {
		t.Fatalf("yaml: %v %q", err, v.Token.Reveal())
	}
	v.Token = ""
	if err := json.Unmarshal([]byte(`{"token":"`+canary+`"}`), &v); err != nil || v.Token.Reveal() != canary {
		t.Fatalf("json: %v %q", err, v.Token.Reveal())
	}
}

type inner struct {
	Password     secret.String            `yaml:"password"`
	PasswordFile string                   `yaml:"password_file"`
	Headers      map[string]secret.String `yaml:"headers"`
	HeadersFile  string                   `yaml:"headers_file"`
}

type outer struct {
	Token     secret.String `yaml:"token"`
	TokenFile string        `yaml:"token_file"`
	Inner     *inner        `yaml:"inner"`
	List      []inner       `yaml:"list"`
	ByName    map[string]*inner
	Embedded  `yaml:",inline"`
	Skipped   secret.String `yaml:"-"`
}

type Embedded struct {
	Key secret.String `yaml:"key"`
}

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResolveReadsFiles(t *testing.T) {
	c := outer{TokenFile: write(t, canary+"\nignored\n"),
		Inner:  &inner{PasswordFile: write(t, "  pw-1  \r\n"), HeadersFile: write(t, "# comment\napi-key = k1\n\nx-other=v=2\n")},
		List:   []inner{{}, {PasswordFile: write(t, "pw-2")}},
		ByName: map[string]*inner{"a": {PasswordFile: write(t, "pw-3")}}}
	if err := secret.Resolve(&c); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	secret.Visit(&c, func(p string, v secret.String) { got[p] = v.Reveal() })
	want := map[string]string{"token": canary, "inner.password": "pw-1", "inner.headers.api-key": "k1",
		"inner.headers.x-other": "v=2", "list[1].password": "pw-2", "byname.a.password": "pw-3"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestResolveErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		c    outer
		path string
		msg  string
	}{
		{outer{Token: "x", TokenFile: write(t, "y")}, "token_file", "is set with token"},
		{outer{TokenFile: missing}, "token_file", "cannot be read"},
		{outer{TokenFile: write(t, "\n")}, "token_file", "is empty"},
		{outer{TokenFile: write(t, secret.Redacted)}, "token_file", "placeholder"},
		{outer{Token: secret.Redacted}, "token", "placeholder"},
		{outer{Inner: &inner{HeadersFile: write(t, "novalue\n"+canary)}}, "inner.headers_file", "line 1 is not key=value"},
		{outer{Inner: &inner{HeadersFile: write(t, "a=1\na="+canary)}}, "inner.headers_file", "line 2 repeats key"},
		{outer{Inner: &inner{Headers: map[string]secret.String{"k": secret.Redacted}}}, "inner.headers.k", "placeholder"},
		{outer{List: []inner{{}, {Password: "p", PasswordFile: write(t, "q")}}}, "list[1].password_file", "is set with password"},
	} {
		err := secret.Resolve(&tc.c)
		var fe *sluice.FieldError
		if !errors.As(err, &fe) || fe.Path != tc.path || !strings.Contains(fe.Msg, tc.msg) {
			t.Errorf("%+v: got %v, want %s: ...%s", tc.c, err, tc.path, tc.msg)
			continue
		}
		if strings.Contains(err.Error(), canary) {
			t.Errorf("error shows the secret: %v", err)
		}
	}
}

func TestPaths(t *testing.T) {
	got := secret.Paths(&outer{})
	want := []string{"byname.{}.headers", "byname.{}.password", "inner.headers", "inner.password", "key",
		"list[].headers", "list[].password", "token"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Paths = %v, want %v", got, want)
	}
}

type keyed struct {
	Keys     []secret.String `yaml:"keys"`
	KeysFile string          `yaml:"keys_file"`
	Clients  []struct {
		Keys []secret.String `yaml:"keys"`
	} `yaml:"clients"`
}

// A list of secrets reads one value per line from its file, is visited
// element by element and is one path.
func TestResolveList(t *testing.T) {
	k := keyed{KeysFile: write(t, "# keys\n"+canary+"-1\n\n  "+canary+"-2  \n")}
	k.Clients = append(k.Clients, struct {
		Keys []secret.String `yaml:"keys"`
	}{Keys: []secret.String{"x"}})
	if err := secret.Resolve(&k); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	secret.Visit(&k, func(p string, v secret.String) { got[p] = v.Reveal() })
	want := map[string]string{"keys[0]": canary + "-1", "keys[1]": canary + "-2", "clients[0].keys[0]": "x"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if p := secret.Paths(&k); !reflect.DeepEqual(p, []string{"clients[].keys", "keys"}) {
		t.Fatalf("Paths = %v", p)
	}
	if out := fmt.Sprint(k) + fmt.Sprintf("%+v %#v", k, k); strings.Contains(out, canary) {
		t.Fatalf("a list shows its secrets: %s", out)
	}
	for _, tc := range []struct {
		k    keyed
		path string
		msg  string
	}{
		{keyed{KeysFile: write(t, "# none\n\n")}, "keys_file", "is empty"},
		{keyed{KeysFile: write(t, "a\n"+secret.Redacted+"\n")}, "keys_file", "line 2 holds the placeholder"},
		{keyed{Keys: []secret.String{"a", secret.Redacted}}, "keys[1]", "placeholder"},
		{keyed{Keys: []secret.String{"a"}, KeysFile: write(t, "b")}, "keys_file", "is set with keys"},
	} {
		err := secret.Resolve(&tc.k)
		var fe *sluice.FieldError
		if !errors.As(err, &fe) || fe.Path != tc.path || !strings.Contains(fe.Msg, tc.msg) {
			t.Errorf("got %v, want %s: ...%s", err, tc.path, tc.msg)
		}
	}
}

// SetPaths names, as Paths does, the secrets that hold a value; Files the
// secret files; ResolveWith reads through the caller's function.
func TestSetPathsFilesResolveWith(t *testing.T) {
	tok, hdr := write(t, canary), write(t, "a=1")
	c := outer{TokenFile: tok, Inner: &inner{HeadersFile: hdr}, List: []inner{{}, {Password: "p"}},
		ByName: map[string]*inner{"x": {Password: "q"}}}
	var read []string
	err := secret.ResolveWith(&c, func(name string) ([]byte, error) {
		read = append(read, name)
		return os.ReadFile(name)
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(read)
	files := secret.Files(&c)
	if !reflect.DeepEqual(read, files) || len(files) != 2 {
		t.Fatalf("read %v, Files = %v", read, files)
	}
	got := secret.SetPaths(&c)
	want := []string{"byname.{}.password", "inner.headers", "list[].password", "token"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SetPaths = %v, want %v", got, want)
	}
	if err := secret.ResolveWith(&outer{TokenFile: tok}, func(string) ([]byte, error) { return nil, os.ErrPermission }); err == nil ||
		!strings.Contains(err.Error(), "token_file") {
		t.Fatalf("a read error: %v", err)
	}
}
