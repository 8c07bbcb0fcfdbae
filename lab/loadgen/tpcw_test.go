// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestTPCWMatrixReproducesMix(t *testing.T) {
	for _, mix := range []string{"browsing", "shopping", "ordering"} {
		t.Run(mix, func(t *testing.T) {
			P, err := TPCWMatrix(mix)
			if err != nil {
				t.Fatal(err)
			}
			pi, _ := TPCWMix(mix)
			sum := 0.0
			for _, p := range pi {
				sum += p
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Fatalf("mix sums to %v", sum)
			}
			for i := range tpN {
				row := 0.0
				for j := range tpN {
					if P[i][j] < 0 {
						t.Fatalf("P[%s][%s] = %v < 0", TPCWInteractions[i], TPCWInteractions[j], P[i][j])
					}
					if pred := tpcwPred[j]; pred >= 0 && pred != i && P[i][j] != 0 {
						t.Errorf("%s follows %s, but only %s may precede it", TPCWInteractions[j], TPCWInteractions[i], TPCWInteractions[pred])
					}
					row += P[i][j]
				}
				if math.Abs(row-1) > 1e-12 {
					t.Errorf("row %s sums to %v", TPCWInteractions[i], row)
				}
			}
			// πP = π exactly.
			for j := range tpN {
				in := 0.0
				for i := range tpN {
					in += pi[i] * P[i][j]
				}
				if math.Abs(in-pi[j]) > 1e-12 {
					t.Errorf("(πP)[%s] = %v, want π = %v", TPCWInteractions[j], in, pi[j])
				}
			}
		})
	}
	if _, err := TPCWMatrix("lunch"); err == nil {
		t.Error("unknown mix: want an error")
	}
}

var bookMeta = &Meta{Kind: "bookstore", Items: 1000, Customers: 200, Subjects: []string{"ARTS", "BIOGRAPHIES", "SCIENCE-FICTION"}}

// TestTPCWSessionMix walks sessions with a fake page that always links a
// cart, and checks the interaction frequencies and the URLs' parameters.
func TestTPCWSessionMix(t *testing.T) {
	for _, mix := range []string{"browsing", "shopping", "ordering"} {
		t.Run(mix, func(t *testing.T) {
			w, err := NewTPCW(bookMeta, mix)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(11, 12))
			s := w.NewSession(r)
			const n = 150000
			var pages [][]byte
			for k := range 50 {
				pages = append(pages, fmt.Appendf(nil, `<a href="/shopping_cart?SHOPPING_ID=%d&amp;I_ID=5">cart</a><a href="/product_detail?I_ID=%d">x</a>`, 1+k, 1+k*19))
			}
			counts := map[string]float64{}
			for k := range n {
				q := s.Next(r)
				counts[q.Type]++
				if k < 20000 {
					checkTPCWURL(t, q)
				}
				s.Observe(q, 200, pages[k%len(pages)])
			}
			pi, _ := TPCWMix(mix)
			for i, name := range TPCWInteractions {
				got := counts[name] / n
				if math.Abs(got-pi[i]) > 0.05*pi[i]+0.0005 {
					t.Errorf("%s: share %.4f, want %.4f", name, got, pi[i])
				}
			}
		})
	}
}

func checkTPCWURL(t *testing.T, q Request) {
	t.Helper()
	u, err := parseRequestURL(q.URL)
	if err != nil {
		t.Fatalf("%s: %v", q.URL, err)
	}
	if u.Path != "/"+q.Type {
		t.Fatalf("URL %s for type %s", q.URL, q.Type)
	}
	v := u.Query()
	intIn := func(name string, hi int) {
		x, err := strconv.Atoi(v.Get(name))
		if err != nil || x < 1 || x > hi {
			t.Fatalf("%s: %s=%q is not an id in 1..%d", q.URL, name, v.Get(name), hi)
		}
	}
	switch q.Type {
	case "home", "buy_confirm":
		intIn("C_ID", bookMeta.Customers)
	case "product_detail", "admin_request", "admin_confirm", "shopping_cart":
		intIn("I_ID", bookMeta.Items)
	}
	switch q.Type {
	case "customer_registration", "buy_request", "buy_confirm":
		if v.Get("SHOPPING_ID") == "" {
			t.Fatalf("%s without SHOPPING_ID", q.URL)
		}
	case "new_products", "best_sellers":
		if v.Get("SUBJECT") == "" {
			t.Fatalf("%s without SUBJECT", q.URL)
		}
	case "search_results":
		if st := v.Get("search_type"); st != "author" && st != "title" && st != "subject" || v.Get("search_string") == "" {
			t.Fatalf("%s: bad search", q.URL)
		}
	}
}

// fakeBookstore issues carts and checks that sessions carry them.
type fakeBookstore struct {
	mu      sync.Mutex
	next    int
	carts   map[string]bool
	bad     []string
	byType  map[string]int
	ordered int
}

func (b *fakeBookstore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	typ := r.URL.Path[1:]
	b.byType[typ]++
	sid := r.URL.Query().Get("SHOPPING_ID")
	switch typ {
	case "shopping_cart":
		if sid == "" {
			b.next++
			sid = strconv.Itoa(b.next)
			b.carts[sid] = true
		} else if !b.carts[sid] {
			b.bad = append(b.bad, r.URL.String())
		}
	case "customer_registration", "buy_request":
		if !b.carts[sid] {
			b.bad = append(b.bad, r.URL.String())
		}
	case "buy_confirm":
		if !b.carts[sid] {
			b.bad = append(b.bad, r.URL.String())
		}
		delete(b.carts, sid)
		b.ordered++
		sid = ""
	}
	fmt.Fprintf(w, "<html><a href=\"/home?C_ID=1\">home</a>")
	if sid != "" {
		fmt.Fprintf(w, "<a href=\"/customer_registration?SHOPPING_ID=%s\">checkout</a>", sid)
	}
	fmt.Fprintf(w, "<a href=\"/product_detail?I_ID=%d\">book</a></html>", 1+b.next%bookMeta.Items)
}

func TestTPCWClosedLoopCarriesCart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBookstore{carts: map[string]bool{}, byType: map[string]int{}}
		cfg := closedConfig(t, b, "50", "exp:0.7s,max=7s", 300*time.Second)
		w, err := NewTPCW(bookMeta, "ordering")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Workload = w
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.bad) > 0 {
			t.Errorf("%d requests carried an unknown cart, e.g. %s", len(b.bad), b.bad[0])
		}
		if b.ordered < 100 {
			t.Errorf("%d orders confirmed, want many in the ordering mix", b.ordered)
		}
		if res.Workload != "tpcw/ordering" || res.ByType["buy_confirm"].OK != int64(b.ordered) {
			t.Errorf("workload %s, buy_confirm ok %d, server saw %d", res.Workload, res.ByType["buy_confirm"].OK, b.ordered)
		}
		pi, _ := TPCWMix("ordering")
		total := float64(res.Total.OK)
		for i, name := range TPCWInteractions {
			if pi[i] < 0.05 {
				continue
			}
			if got := float64(b.byType[name]) / total; !within(got, pi[i], 0.10) {
				t.Errorf("%s: share %.4f, want %.4f ±10%%", name, got, pi[i])
			}
		}
	})
}

func TestTPCWObserveParsing(t *testing.T) {
	w, _ := NewTPCW(bookMeta, "browsing")
	s := w.NewSession(rand.New(rand.NewPCG(1, 1))).(*tpcwSession)
	s.Observe(Request{Type: "home"}, 200, []byte(`<a href="/x?XI_ID=7&amp;I_ID=12">a</a> <a href='/y?SHOPPING_ID=ab%2Fc&I_ID=5000'>b</a> I_ID=3 ?I_ID=999`))
	if s.shoppingID != "ab/c" {
		t.Errorf("shoppingID %q, want ab/c", s.shoppingID)
	}
	if fmt.Sprint(s.linked) != "[12 999]" {
		t.Errorf("linked items %v, want [12 999] (5000 is out of range, XI_ID and bare I_ID are not parameters)", s.linked)
	}
	s.Observe(Request{Type: "buy_confirm"}, 200, []byte(`SHOPPING_ID=9`))
	if s.shoppingID != "" {
		t.Errorf("after buy_confirm shoppingID %q, want a new cart next time", s.shoppingID)
	}
	s.Observe(Request{Type: "home"}, 503, []byte(`?SHOPPING_ID=9&I_ID=4`))
	if s.shoppingID != "" || len(s.linked) != 0 {
		t.Errorf("a rejected page must not change the session: %q %v", s.shoppingID, s.linked)
	}
	for _, m := range []*Meta{{Kind: "static"}, {Kind: "bookstore", Items: 0, Customers: 1, Subjects: []string{"A"}}} {
		if _, err := NewTPCW(m, "browsing"); err == nil {
			t.Errorf("NewTPCW(%+v): want an error", m)
		}
	}
}
