// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/proxy/admin"
)

// admin.public takes the names of read endpoints only; a bad entry is an
// error naming it.
func TestAdminPublicValidation(t *testing.T) {
	head := goodHead + "admin:\n  token: 0123456789abcdef0123\n"
	for _, tc := range []struct{ public, want string }{
		{"[metrics]", ""},
		{"[metrics, state, config, ui, index]", ""},
		{"[metrics, reload]", `p.yaml:8: admin.public[1]: "reload" changes the proxy and always needs the token`},
		{"[shadow]", `admin.public[0]: "shadow" changes the proxy`},
		{"[pprof]", `admin.public[0]: "pprof" always needs the token`},
		{"[metric]", `admin.public[0]: "metric" is not an endpoint name: must be one of config, index, metrics, state, ui`},
		{"[state, state]", `admin.public[1]: "state" is listed twice`},
	} {
		_, err := Parse("p.yaml", []byte(head+"  public: "+tc.public+"\n"))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("public: %s: error %v, want %q", tc.public, err, tc.want)
		}
	}
}

// A non-loopback admin address without a token is refused, and the error
// says how to fix it.
func TestAdminPublicAddressNeedsToken(t *testing.T) {
	for _, tc := range []struct{ admin, path string }{
		{"  addr: 0.0.0.0:9901\n", "admin.addr"},
		{"  addr: 0.0.0.0:9901\n  allow_public: true\n", "admin.token"},
	} {
		_, err := Parse("p.yaml", []byte(goodHead+"admin:\n"+tc.admin))
		if err == nil {
			t.Fatalf("%q: accepted", tc.admin)
		}
		for _, want := range []string{tc.path + ": ", "token_file", "Secret", "127.0.0.1:9901"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error %q lacks %q", tc.admin, err, want)
			}
		}
	}
}

// The route table's read endpoints are exactly the names admin.public
// takes, and every route is on the index page.
func TestAdminRouteTable(t *testing.T) {
	be := backend(t, echoHeaders)
	p := startProxy(t, strings.Replace(baseConfig(be.URL, ""), "admin:\n", "admin:\n  pprof: true\n", 1))
	var read []string
	_, _, index := get(t, p.admin+"/", nil)
	for _, rt := range p.srv.adm.Routes(true) {
		if rt.Auth == admin.AuthRead || rt.Auth == admin.AuthUI {
			if !slices.Contains(read, rt.Name) {
				read = append(read, rt.Name)
			}
		}
		if rt.Auth == admin.AuthNone && rt.Path != "/healthz" && rt.Path != "/readyz" {
			t.Errorf("%s is open to anyone", rt.Path)
		}
		if rt.Doc != "" && !strings.Contains(index, strings.TrimSuffix(rt.Path, "{$}")) {
			t.Errorf("the index page lacks %s:\n%s", rt.Path, index)
		}
	}
	slices.Sort(read)
	if !slices.Equal(read, admin.PublicEndpoints()) {
		t.Errorf("read endpoints %v, admin.public takes %v", read, admin.PublicEndpoints())
	}
}

// admin.public opens the endpoints it names, and only those; a reload
// changes it.
func TestAdminPublicOpensListed(t *testing.T) {
	be := backend(t, echoHeaders)
	cfg := strings.Replace(baseConfig(be.URL, ""), "admin:\n  addr: 127.0.0.1:0\n",
		"admin:\n  addr: 127.0.0.1:0\n  token: "+oldToken+"\n  public: [metrics, state]\n", 1)
	p := startProxy(t, cfg)
	for path, want := range map[string]int{"/metrics": 200, "/state": 200, "/config": 401, "/ui": 401, "/ui/events": 401, "/": 401, "/healthz": 200} {
		if code := statusOf(t, p.admin+path, ""); code != want {
			t.Errorf("GET %s without the token: %d, want %d", path, code, want)
		}
	}
	if code, _ := doAuth(t, http.MethodPut, p.admin+"/shadow", `{"shadow":true}`, ""); code != 401 {
		t.Errorf("PUT /shadow without the token: %d", code)
	}
	must(t, os.WriteFile(p.file, []byte(strings.Replace(cfg, "  public: [metrics, state]\n", "  public: [ui]\n", 1)), 0o644))
	if code, body := doAuth(t, http.MethodPost, p.admin+"/reload", "", oldToken); code != 200 {
		t.Fatalf("reload: %d %s", code, body)
	}
	for path, want := range map[string]int{"/metrics": 401, "/state": 401, "/ui": 200} {
		if code := statusOf(t, p.admin+path, ""); code != want {
			t.Errorf("after the reload, GET %s without the token: %d, want %d", path, code, want)
		}
	}
}
