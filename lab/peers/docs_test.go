// SPDX-License-Identifier: Apache-2.0

package peers_test

import (
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/peers/breakwater"
	"github.com/sluicehq/sluice/lab/peers/dagor"
	"github.com/sluicehq/sluice/lab/peers/rajomon"
	"github.com/sluicehq/sluice/lab/peers/topfull"
)

// docValue writes a setting as docs/algorithms.md does.
func docValue(v reflect.Value) (string, bool) {
	if d, ok := v.Interface().(time.Duration); ok {
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s, true
	}
	switch v.Kind() {
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64), true
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10), true
	case reflect.String:
		return v.String(), true
	}
	return "", false
}

// Every setting a peer's DefaultConfig gives a value states it in its
// section of docs/algorithms.md as `key` value, and the value is the
// code's (the product's doc checker cannot import the lab).
func TestDocsStateDefaults(t *testing.T) {
	b, err := os.ReadFile("../../docs/algorithms.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, tc := range []struct {
		heading string
		cfg     any
	}{
		{"### Breakwater (", breakwater.DefaultConfig()},
		{"### DAGOR (", dagor.DefaultConfig()},
		{"### Rajomon (", rajomon.DefaultConfig()},
		{"### TopFull (", topfull.DefaultConfig()},
	} {
		i := strings.Index(doc, tc.heading)
		if i < 0 {
			t.Fatalf("no section %q", tc.heading)
		}
		sec := doc[i+len(tc.heading):]
		if j := strings.Index(sec, "\n#"); j >= 0 {
			sec = sec[:j]
		}
		sec = strings.Join(strings.Fields(sec), " ")
		v := reflect.ValueOf(tc.cfg)
		for f := range v.NumField() {
			key, _, _ := strings.Cut(v.Type().Field(f).Tag.Get("yaml"), ",")
			val, ok := docValue(v.Field(f))
			if !ok || key == "" {
				continue
			}
			re := regexp.MustCompile("`" + regexp.QuoteMeta(key) + "` " + regexp.QuoteMeta(val) + `(?:[^0-9.µa-z]|\.(?:[^0-9]|$)|$)`)
			if !re.MatchString(sec) {
				t.Errorf("%s: docs/algorithms.md does not state `%s` %s", strings.Trim(tc.heading, "# ("), key, val)
			}
		}
	}
}

func TestDocValue(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Hour: "1h", time.Second: "1s", 80 * time.Microsecond: "80µs",
		10 * time.Millisecond: "10ms", 0: "0s", time.Minute: "1m", 90 * time.Second: "1m30s"} {
		if got, _ := docValue(reflect.ValueOf(d)); got != want {
			t.Errorf("%v written %q, want %q", d, got, want)
		}
	}
}
