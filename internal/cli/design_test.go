// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
)

// decodeObject parses a JSON object and checks that its keys are exactly
// want.
func decodeObject(t *testing.T, s string, want []string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("output is not a JSON object: %v\n%s", err, s)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(keys, want) {
		t.Fatalf("JSON keys %v, want %v", keys, want)
	}
	return m
}

var kihlKeys = []string{"sigma", "h_s", "K", "Ti", "a1", "a2", "poles", "stable_linear", "stable_tsypkin", "eta", "verdict"}

func wantNum(t *testing.T, m map[string]any, key string, want, tol float64) {
	t.Helper()
	got, ok := m[key].(float64)
	if !ok || math.Abs(got-want) > tol {
		t.Errorf("%s = %v, want %v ± %v", key, m[key], want, tol)
	}
}

func TestDesignKihlText(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{
			"pole placement",
			[]string{"design", "kihl", "--sigma", "44.4", "--h", "1s", "--a1", "-1.55", "--a2", "0.71"},
			[]string{
				"pole placement for z·(z² + a1·z + a2), a1 = -1.55, a2 = 0.71:",
				"K  = (2 + a1)·σ               = 19.98\n",
				"Ti = h·(2 + a1)/(1 + a1 + a2) = 2.8125 s\n",
				"analysis of K = 19.98, Ti = 2.8125 s:",
				"stable_linear:  true",
				"stable_tsypkin: true (η = 0,",
				"verdict: stable: linear model and Tsypkin criterion both satisfied (η = 0)\n",
			},
		},
		{
			"good analysis",
			[]string{"design", "kihl", "--sigma", "44.4", "--h", "1s", "--K", "20", "--Ti", "2.8"},
			[]string{
				"σ = 44.4 requests per period, h = 1s",
				"a1 = K/σ − 2                  = -1.54955\n",
				"a2 = 1 − K/σ + K·h/(σ·Ti)     = 0.710425\n",
				"closed-loop poles: 0 (|z| = 0), 0.774775+0.331887i (|z| = 0.842867), 0.774775−0.331887i (|z| = 0.842867)",
				"stable_linear:  true",
				"stable_tsypkin: true",
				"verdict: stable: linear model and Tsypkin criterion both satisfied",
			},
		},
		{
			"bad analysis",
			[]string{"design", "kihl", "--sigma", "44.4", "--h", "1s", "--K", "20", "--Ti", "0.1"},
			[]string{
				"a2 = 1 − K/σ + K·h/(σ·Ti)     = 5.05405\n",
				"stable_linear:  false",
				"stable_tsypkin: false; poles of G: |z| = 2.01347, |z| = 2.01347",
				"verdict: unstable: closed-loop pole at |z| = 2.25 outside the unit circle\n",
			},
		},
		{
			"service time instead of sigma, h defaults to 1s",
			[]string{"design", "kihl", "--service-time", "22.5ms", "--K", "20", "--Ti", "2.8"},
			[]string{"σ = 44.4444 requests per period, h = 1s", "verdict: stable:"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, c.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestDesignKihlJSON(t *testing.T) {
	t.Run("good", func(t *testing.T) {
		m := designKihlJSON(t, "--sigma", "44.4", "--h", "1s", "--K", "20", "--Ti", "2.8")
		wantNum(t, m, "sigma", 44.4, 0)
		wantNum(t, m, "h_s", 1, 0)
		wantNum(t, m, "K", 20, 0)
		wantNum(t, m, "Ti", 2.8, 0)
		wantNum(t, m, "a1", -1.5495495, 1e-7)
		wantNum(t, m, "a2", 0.7104247, 1e-7)
		if m["stable_linear"] != true || m["stable_tsypkin"] != true {
			t.Errorf("stable_linear %v, stable_tsypkin %v", m["stable_linear"], m["stable_tsypkin"])
		}
		if _, ok := m["eta"].(float64); !ok {
			t.Errorf("eta = %v, want a number", m["eta"])
		}
		poles, ok := m["poles"].([]any)
		if !ok || len(poles) != 3 {
			t.Fatalf("poles = %v", m["poles"])
		}
		for _, p := range poles {
			pm, _ := p.(map[string]any)
			if len(pm) != 3 || pm["re"] == nil || pm["im"] == nil || pm["abs"] == nil {
				t.Errorf("pole %v, want keys re, im, abs", p)
			}
		}
		wantNum(t, poles[1].(map[string]any), "abs", 0.8428670, 1e-7)
		if v, _ := m["verdict"].(string); !strings.HasPrefix(v, "stable: ") {
			t.Errorf("verdict %q", v)
		}
	})
	t.Run("bad", func(t *testing.T) {
		m := designKihlJSON(t, "--sigma", "44.4", "--h", "1s", "--K", "20", "--Ti", "0.1")
		wantNum(t, m, "a2", 5.0540541, 1e-7)
		if m["stable_linear"] != false || m["stable_tsypkin"] != false || m["eta"] != nil {
			t.Errorf("stable_linear %v, stable_tsypkin %v, eta %v", m["stable_linear"], m["stable_tsypkin"], m["eta"])
		}
		if m["verdict"] != "unstable: closed-loop pole at |z| = 2.25 outside the unit circle" {
			t.Errorf("verdict %q", m["verdict"])
		}
	})
	t.Run("pole placement", func(t *testing.T) {
		m := designKihlJSON(t, "--sigma", "44.4", "--h", "2s", "--a1", "-1.55", "--a2", "0.71")
		wantNum(t, m, "h_s", 2, 0)
		wantNum(t, m, "K", 19.98, 1e-9)
		wantNum(t, m, "Ti", 2*2.8125, 1e-9) // Ti scales with h
		wantNum(t, m, "a1", -1.55, 1e-12)
		wantNum(t, m, "a2", 0.71, 1e-12)
	})
}

// designKihlJSON runs sluice design kihl with args and --json, and returns
// the object it prints.
func designKihlJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, _ := runCLI(t, append(append([]string{"design", "kihl"}, args...), "--json")...)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	return decodeObject(t, out, kihlKeys)
}

func TestDesignKihlRegion(t *testing.T) {
	code, out, errOut := runCLI(t, "design", "kihl", "--sigma", "44.4", "--region")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2+20+1 {
		t.Fatalf("%d lines, want 23:\n%s", len(lines), out)
	}
	top, bottom := lines[2], lines[21]
	if !strings.HasPrefix(top, "h/Ti 0.975  ") || !strings.HasPrefix(bottom, "h/Ti 0.025  ") {
		t.Errorf("rows not ordered by h/Ti descending:\n%s", out)
	}
	// Bottom row: Tsypkin-stable at small K/σ, linear-only in the middle,
	// unstable at large K/σ; no point is Tsypkin-only.
	row := strings.TrimPrefix(bottom, "h/Ti 0.025  ")
	if len(row) != 40 || row[0] != '#' || !strings.Contains(row, "+") || row[39] != '.' {
		t.Errorf("bottom row %q", row)
	}
	if strings.Contains(strings.Join(lines[2:22], "\n"), "!") {
		t.Errorf("Tsypkin-only points in the map:\n%s", out)
	}

	code, out, _ = runCLI(t, "design", "kihl", "--sigma", "44.4", "--region", "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d", code)
	}
	var pts []map[string]any
	if err := json.Unmarshal([]byte(out), &pts); err != nil || len(pts) != 800 {
		t.Fatalf("--json: %d points, err %v", len(pts), err)
	}
	decodeObject(t, mustJSON(t, pts[0]), []string{"k_sigma", "h_ti", "K", "Ti", "stable_linear", "stable_tsypkin"})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDesignYaksha(t *testing.T) {
	code, out, errOut := runCLI(t, "design", "yaksha", "--tref", "150ms", "--lambda0", "50", "--h", "1s")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, w := range []string{
		"Tref = 150ms, λ0 = 50 req/s, h = 1s, closed-loop pole s = -0.1 1/s",
		"kg = λ0·Tref²                 = 1.125 s\n",
		"kp = 1/(√2·kg)                = 0.628539 1/s\n",
		"ki = −pole·(kp + 1/kg)        = 0.151743 1/s²\n",
		"a  = kp + ki·h/2              = 0.704411 1/s\n",
		"b  = kp − ki·h/2              = 0.552668 1/s\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}

	code, out, _ = runCLI(t, "design", "yaksha", "--tref", "150ms", "--lambda0", "50", "--h", "2s", "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d", code)
	}
	m := decodeObject(t, out, []string{"tref_s", "lambda0", "h_s", "kg", "kp", "ki", "a", "b"})
	wantNum(t, m, "tref_s", 0.15, 0)
	wantNum(t, m, "lambda0", 50, 0)
	wantNum(t, m, "h_s", 2, 0)
	wantNum(t, m, "kg", 1.125, 1e-12)
	wantNum(t, m, "kp", 0.628539, 1e-6)
	wantNum(t, m, "ki", 0.151743, 1e-6)
	wantNum(t, m, "a", 0.628539+0.151743, 1e-6) // h = 2 s: A = Kp + Ki
	wantNum(t, m, "b", 0.628539-0.151743, 1e-6)
}

func TestDesignUsageErrors(t *testing.T) {
	k := []string{"design", "kihl"}
	y := []string{"design", "yaksha"}
	cat := func(a []string, b ...string) []string { return append(slices.Clone(a), b...) }
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no design", []string{"design"}, "name a design: kihl or yaksha"},
		{"unknown design", []string{"design", "voigt"}, `unknown design "voigt"`},
		{"kihl positional arg", cat(k, "extra"), `unknown command "extra"`},
		{"kihl no sigma", cat(k, "--K", "20", "--Ti", "2.8"), "give --sigma"},
		{"kihl sigma and service time", cat(k, "--sigma", "44", "--service-time", "22ms", "--K", "20", "--Ti", "2.8"), "--sigma and --service-time are alternatives"},
		{"kihl zero sigma", cat(k, "--sigma", "0", "--K", "20", "--Ti", "2.8"), "--sigma must be a positive finite number, got 0"},
		{"kihl negative sigma", cat(k, "--sigma", "-3", "--K", "20", "--Ti", "2.8"), "--sigma must be a positive finite number, got -3"},
		{"kihl NaN sigma", cat(k, "--sigma", "NaN", "--K", "20", "--Ti", "2.8"), "--sigma must"},
		{"kihl bad sigma", cat(k, "--sigma", "many", "--K", "20", "--Ti", "2.8"), `invalid argument "many" for "--sigma"`},
		{"kihl zero service time", cat(k, "--service-time", "0s", "--K", "20", "--Ti", "2.8"), "--service-time must be a positive duration"},
		{"kihl zero h", cat(k, "--sigma", "44", "--h", "0s", "--K", "20", "--Ti", "2.8"), "--h must be a positive duration, got 0s"},
		{"kihl bad h", cat(k, "--sigma", "44", "--h", "1", "--K", "20", "--Ti", "2.8"), `invalid argument "1" for "--h"`},
		{"kihl no mode", cat(k, "--sigma", "44"), "give --a1 and --a2 (pole placement), --K and --Ti (analysis), or --region"},
		{"kihl only a1", cat(k, "--sigma", "44", "--a1", "-1.55"), "--a1 needs --a2"},
		{"kihl only a2", cat(k, "--sigma", "44", "--a2", "0.71"), "--a2 needs --a1"},
		{"kihl only K", cat(k, "--sigma", "44", "--K", "20"), "--K needs --Ti"},
		{"kihl only Ti", cat(k, "--sigma", "44", "--Ti", "2.8"), "--Ti needs --K"},
		{"kihl both pairs", cat(k, "--sigma", "44", "--a1", "-1.55", "--a2", "0.71", "--K", "20", "--Ti", "2.8"), "are alternatives; give one pair"},
		{"kihl mixed pairs", cat(k, "--sigma", "44", "--a1", "-1.55", "--Ti", "2.8"), "are alternatives"},
		{"kihl region and K", cat(k, "--sigma", "44", "--region", "--K", "20", "--Ti", "2.8"), "--region cannot be combined"},
		{"kihl zero Ti", cat(k, "--sigma", "44", "--K", "20", "--Ti", "0"), "Ti must be a finite non-zero number"},
		{"kihl pole at 1", cat(k, "--sigma", "44", "--a1", "-1.5", "--a2", "0.5"), "1 + a1 + a2 = 0"},
		{"kihl lowercase k", cat(k, "--sigma", "44", "--k", "20", "--Ti", "2.8"), "unknown flag: --k"},
		{"kihl missing value", cat(k, "--sigma", "44", "--K", "20", "--Ti"), "flag needs an argument: --Ti"},
		{"yaksha no tref", cat(y, "--lambda0", "50"), "--tref is required"},
		{"yaksha no lambda0", cat(y, "--tref", "150ms"), "--lambda0 is required"},
		{"yaksha zero tref", cat(y, "--tref", "0s", "--lambda0", "50"), "--tref must be a positive duration"},
		{"yaksha negative lambda0", cat(y, "--tref", "150ms", "--lambda0", "-5"), "--lambda0 must be a positive finite rate"},
		{"yaksha infinite lambda0", cat(y, "--tref", "150ms", "--lambda0", "+Inf"), "--lambda0 must be a positive finite rate"},
		{"yaksha negative h", cat(y, "--tref", "150ms", "--lambda0", "50", "--h", "-1s"), "--h must be a positive duration"},
		{"yaksha unit-less tref", cat(y, "--tref", "150", "--lambda0", "50"), `invalid argument "150" for "--tref"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, c.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", code, errOut)
			}
			if !strings.Contains(errOut, c.want) {
				t.Errorf("stderr %q, want it to contain %q", errOut, c.want)
			}
			if out != "" {
				t.Errorf("unexpected stdout %q", out)
			}
		})
	}
}

// TestDesignHelpFlags checks that the long flag --h (the control period)
// and cobra's -h/--help shorthand coexist.
func TestDesignHelpFlags(t *testing.T) {
	for _, args := range [][]string{
		{"design", "kihl", "-h"},
		{"design", "kihl", "--help"},
		{"design", "kihl", "--h", "2s", "-h"},
		{"design", "yaksha", "-h"},
		{"design", "--help"},
	} {
		code, out, errOut := runCLI(t, args...)
		if code != 0 || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
		if !strings.Contains(out, "-h, --help") {
			t.Errorf("%q: no help text:\n%s", args, out)
		}
	}
	_, out, _ := runCLI(t, "design", "kihl", "--help")
	for _, w := range []string{"--h duration", "--K float", "--Ti float", "--a1 float", "--a2 float", "--sigma float", "--service-time duration", "--json", "--region", "Andersson, Kihl"} {
		if !strings.Contains(out, w) {
			t.Errorf("kihl help lacks %q:\n%s", w, out)
		}
	}
	_, out, _ = runCLI(t, "design", "yaksha", "--help")
	for _, w := range []string{"--tref duration", "--lambda0 float", "--h duration", "--json", "Kamra, Misra and Nahum"} {
		if !strings.Contains(out, w) {
			t.Errorf("yaksha help lacks %q:\n%s", w, out)
		}
	}
	_, out, _ = runCLI(t, "design", "--help")
	if !strings.Contains(out, "kihl") || !strings.Contains(out, "yaksha") {
		t.Errorf("design help does not list kihl and yaksha:\n%s", out)
	}
}
