// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// bsClient talks to a bookstore under test.
type bsClient struct {
	t   *testing.T
	srv *httptest.Server
	b   *Bookstore
}

// get fetches path with an optional quality and returns status and body.
func (c *bsClient) get(path string, quality string) (int, string, http.Header) {
	c.t.Helper()
	req, err := http.NewRequest("GET", c.srv.URL+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if quality != "" {
		req.Header.Set(QualityHeader, quality)
	}
	resp, err := c.srv.Client().Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
		c.t.Errorf("GET %s: Content-Length %q for %d bytes", path, cl, len(body))
	}
	u, err := strconv.ParseFloat(resp.Header.Get(UtilizationHeader), 64)
	if err != nil || u < 0 || u > 1 {
		c.t.Errorf("GET %s: utilization %q not in [0,1]", path, resp.Header.Get(UtilizationHeader))
	}
	return resp.StatusCode, string(body), resp.Header
}

// ok fetches path and fails unless the status is 200.
func (c *bsClient) ok(path string) string {
	c.t.Helper()
	code, body, _ := c.get(path, "")
	if code != 200 {
		c.t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return body
}

var (
	hrefRE    = regexp.MustCompile(`href="([^"]*)"`)
	bestRE    = regexp.MustCompile(`<li><a href="/product_detail\?I_ID=(\d+)[^"]*">[^<]*</a> by [^<]*<span class="qty">(\d+)</span>`)
	listRE    = regexp.MustCompile(`<li><a href="/product_detail\?I_ID=(\d+)[^"]*">([^<]*)</a> by `)
	spanRE    = func(class string) *regexp.Regexp { return regexp.MustCompile(`class="` + class + `">([^<]*)<`) }
	contractQ = map[string][]string{
		"/home": {"C_ID"}, "/new_products": {"SUBJECT"}, "/best_sellers": {"SUBJECT"}, "/product_detail": {"I_ID"},
		"/search_request": nil, "/search_results": {"search_type", "search_string"},
		"/shopping_cart": {"I_ID", "QTY", "ADD_FLAG"}, "/customer_registration": nil,
		"/buy_request": {"RETURNING_FLAG", "UNAME", "PASSWD"}, "/buy_confirm": nil, "/order_inquiry": nil,
		"/order_display": {"UNAME", "PASSWD"}, "/admin_request": {"I_ID"}, "/admin_confirm": {"I_ID", "NEW_COST"},
	}
)

func span(t *testing.T, body, class string) string {
	t.Helper()
	m := spanRE(class).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %q span in page:\n%s", class, body)
	}
	return m[1]
}

// checkLinks verifies that every link of a page goes to a contract
// interaction with contract parameter names.
func checkLinks(t *testing.T, path, body string) {
	t.Helper()
	for _, m := range hrefRE.FindAllStringSubmatch(body, -1) {
		target, query, _ := strings.Cut(m[1], "?")
		allowed, ok := contractQ[target]
		if !ok {
			t.Errorf("%s links to %q, not a contract interaction", path, m[1])
			continue
		}
		if query == "" {
			continue
		}
		for _, kv := range strings.Split(query, "&") {
			k, _, _ := strings.Cut(kv, "=")
			if k != "SHOPPING_ID" && k != "C_ID" && !slices.Contains(allowed, k) {
				t.Errorf("%s links to %q with parameter %q not in the contract for %s", path, m[1], k, target)
			}
		}
	}
}

func newSQLiteBookstore(t *testing.T, dir string) *Bookstore {
	t.Helper()
	cfg := DefaultBookstoreConfig()
	cfg.Data = dir
	b, err := NewBookstore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBookstoreSQLite(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	b := newSQLiteBookstore(t, dir)
	t.Logf("generated scale 1 in %v", time.Since(start))
	if !b.Generated() {
		t.Fatal("a new data directory was not generated")
	}
	runBookstoreSuite(t, b)
	b.Close()

	// Reopening the same directory at the same scale reuses the data,
	// including the orders written by the suite.
	b2 := newSQLiteBookstore(t, dir)
	defer b2.Close()
	if b2.Generated() {
		t.Error("an existing database of the same scale was regenerated")
	}
	var n int
	if err := b2.DB().QueryRow(`SELECT COUNT(*) FROM orders`).Scan(&n); err != nil || n <= 2592 {
		t.Errorf("orders after reopening = %d, %v; want more than the 2592 generated", n, err)
	}
}

func TestBookstorePostgres(t *testing.T) {
	dsn := os.Getenv("SLUICE_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("set SLUICE_TEST_POSTGRES to a postgres:// DSN to run the PostgreSQL tests")
	}
	cfg := DefaultBookstoreConfig()
	cfg.DB, cfg.Schema, cfg.Fresh = dsn, "sluice_test", true
	b, err := NewBookstore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Dialect() != dialectPostgres || !b.Generated() {
		t.Fatalf("dialect %s generated %v", b.Dialect(), b.Generated())
	}
	runBookstoreSuite(t, b)
	b.Close()
	cfg.Fresh = false
	b2, err := NewBookstore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if b2.Generated() {
		t.Error("an existing PostgreSQL database of the same scale was regenerated")
	}
}

func TestBookstoreConfigValidate(t *testing.T) {
	tests := []struct {
		mod   func(*BookstoreConfig)
		field string
	}{
		{func(c *BookstoreConfig) { c.DB = "mysql://x" }, `db="mysql://x"`},
		{func(c *BookstoreConfig) { c.Scale = 0 }, "scale=0"},
		{func(c *BookstoreConfig) { c.Pool = 0 }, "pool=0"},
		{func(c *BookstoreConfig) { c.Schema = "Bad-Name" }, `schema="Bad-Name"`},
	}
	for _, tt := range tests {
		c := DefaultBookstoreConfig()
		tt.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tt.field)
		}
	}
}

// runBookstoreSuite checks the 14 interactions against the database.
func runBookstoreSuite(t *testing.T, b *Bookstore) {
	srv := httptest.NewServer(b)
	defer srv.Close()
	newC := func(t *testing.T) *bsClient { return &bsClient{t: t, srv: srv, b: b} }
	db := b.DB()
	q := b.db.rebind

	t.Run("meta", func(t *testing.T) {
		var m BookstoreMeta
		getJSON(t, srv.Client(), srv.URL+"/_meta", &m)
		if m.Kind != "bookstore" || m.Items != 1000 || m.Customers != 2880 || len(m.Subjects) != 24 || m.DB != b.Dialect() {
			t.Errorf("/_meta = %+v", m)
		}
	})

	t.Run("product detail from the database", func(t *testing.T) {
		c := newC(t)
		for _, id := range []int{1, 17, 1000} {
			var title string
			var cost int64
			if err := db.QueryRow(q(`SELECT i_title, i_cost FROM item WHERE i_id = ?`), id).Scan(&title, &cost); err != nil {
				t.Fatal(err)
			}
			body := c.ok(fmt.Sprintf("/product_detail?I_ID=%d", id))
			if got := span(t, body, "title"); got != title {
				t.Errorf("item %d: title %q, want %q", id, got, title)
			}
			if got := span(t, body, "our-price"); got != money(cost) {
				t.Errorf("item %d: price %q, want %q", id, got, money(cost))
			}
			if !strings.Contains(body, `class="related"`) {
				t.Errorf("item %d: no related items at full quality", id)
			}
			checkLinks(t, "/product_detail", body)
		}
	})

	t.Run("search", func(t *testing.T) {
		c := newC(t)
		var title, lname string
		if err := db.QueryRow(q(`SELECT i_title, a_lname FROM item JOIN author ON a_id = i_a_id WHERE i_id = ?`), 321).Scan(&title, &lname); err != nil {
			t.Fatal(err)
		}
		find := func(typ, s string) []string {
			body := c.ok("/search_results?search_type=" + typ + "&search_string=" + url.QueryEscape(s))
			checkLinks(t, "/search_results", body)
			var ids []string
			for _, m := range listRE.FindAllStringSubmatch(body, -1) {
				ids = append(ids, m[1])
			}
			return ids
		}
		if ids := find("title", strings.ToUpper(title)); !slices.Contains(ids, "321") {
			t.Errorf("title search for %q: %v lacks item 321", title, ids)
		}
		if ids := find("author", strings.ToLower(lname[:3])); len(ids) == 0 {
			t.Errorf("author search for %q found nothing", lname[:3])
		}
		var travel int
		db.QueryRow(q(`SELECT COUNT(*) FROM item WHERE i_subject = ?`), "TRAVEL").Scan(&travel)
		if ids := find("subject", "travel"); len(ids) != min(50, travel) || travel == 0 {
			t.Errorf("subject search: %d results, want min(50, %d)", len(ids), travel)
		}
		if ids := find("title", "%"); len(ids) != 0 {
			t.Errorf("title search for a literal %%: %d results, want 0", len(ids))
		}
	})

	t.Run("best sellers ordered by quantity", func(t *testing.T) {
		c := newC(t)
		// Compute the expected ranking in Go from the raw rows.
		var maxO int64
		db.QueryRow(`SELECT MAX(o_id) FROM orders`).Scan(&maxO)
		rows, err := db.Query(q(`SELECT ol_i_id, ol_qty FROM order_line JOIN item ON i_id = ol_i_id
			WHERE ol_o_id > ? AND i_subject = ?`), maxO-bestSellerWindow, "ARTS")
		if err != nil {
			t.Fatal(err)
		}
		sums := map[int64]int64{}
		for rows.Next() {
			var id, qty int64
			rows.Scan(&id, &qty)
			sums[id] += qty
		}
		rows.Close()
		type kv struct{ id, qty int64 }
		var want []kv
		for id, s := range sums {
			want = append(want, kv{id, s})
		}
		sort.Slice(want, func(i, j int) bool {
			if want[i].qty != want[j].qty {
				return want[i].qty > want[j].qty
			}
			return want[i].id < want[j].id
		})
		want = want[:min(50, len(want))]
		body := c.ok("/best_sellers?SUBJECT=ARTS")
		checkLinks(t, "/best_sellers", body)
		got := bestRE.FindAllStringSubmatch(body, -1)
		if len(got) != len(want) || len(got) == 0 {
			t.Fatalf("%d best sellers, want %d", len(got), len(want))
		}
		for i, m := range got {
			if m[1] != strconv.FormatInt(want[i].id, 10) || m[2] != strconv.FormatInt(want[i].qty, 10) {
				t.Fatalf("rank %d: item %s qty %s, want item %d qty %d", i+1, m[1], m[2], want[i].id, want[i].qty)
			}
		}
	})

	t.Run("new products newest first", func(t *testing.T) {
		c := newC(t)
		body := c.ok("/new_products?SUBJECT=cooking")
		var prev int64 = 1 << 62
		ids := listRE.FindAllStringSubmatch(body, -1)
		var n int
		db.QueryRow(q(`SELECT COUNT(*) FROM item WHERE i_subject = ?`), "COOKING").Scan(&n)
		if len(ids) != min(50, n) || n == 0 {
			t.Fatalf("%d new products, want min(50, %d)", len(ids), n)
		}
		for _, m := range ids {
			var pub int64
			var subject string
			db.QueryRow(q(`SELECT i_pub_date, i_subject FROM item WHERE i_id = ?`), m[1]).Scan(&pub, &subject)
			if subject != "COOKING" || pub > prev {
				t.Fatalf("item %s (%s, %d) out of order after %d", m[1], subject, pub, prev)
			}
			prev = pub
		}
	})

	t.Run("home and quality", func(t *testing.T) {
		c := newC(t)
		var fn, ln string
		db.QueryRow(q(`SELECT c_fname, c_lname FROM customer WHERE c_id = ?`), 42).Scan(&fn, &ln)
		body := c.ok("/home?C_ID=42")
		if !strings.Contains(body, "Welcome back, "+fn+" "+ln) {
			t.Errorf("home does not greet customer 42 (%s %s)", fn, ln)
		}
		for _, part := range []string{`class="promotions"`, `class="sidebar"`, "/best_sellers?SUBJECT=ARTS&C_ID=42"} {
			if !strings.Contains(body, part) {
				t.Errorf("full-quality home lacks %s", part)
			}
		}
		checkLinks(t, "/home", body)
		code, low, _ := c.get("/home?C_ID=42", "0.3")
		if code != 200 || strings.Contains(low, `class="promotions"`) || strings.Contains(low, `class="sidebar"`) {
			t.Errorf("home at quality 0.3 (status %d) still has promotions or sidebar", code)
		}
		code, low, _ = c.get("/product_detail?I_ID=5", "0.49")
		if code != 200 || strings.Contains(low, `class="related"`) {
			t.Errorf("product detail at quality 0.49 (status %d) still has related items", code)
		}
		code, full, _ := c.get("/product_detail?I_ID=5", "0.5")
		if code != 200 || !strings.Contains(full, `class="related"`) {
			t.Errorf("product detail at quality 0.5 lacks related items")
		}
	})

	t.Run("shopping, buying and order display", func(t *testing.T) {
		c := newC(t)
		body := c.ok("/shopping_cart?I_ID=10&QTY=2&ADD_FLAG=Y")
		scid := span(t, body, "shopping-id")
		checkLinks(t, "/shopping_cart", body)
		if !strings.Contains(body, "/customer_registration?SHOPPING_ID="+scid) {
			t.Errorf("cart page lacks the checkout link with its SHOPPING_ID")
		}
		c.ok("/shopping_cart?SHOPPING_ID=" + scid + "&I_ID=20&ADD_FLAG=Y")
		c.ok("/shopping_cart?SHOPPING_ID=" + scid + "&I_ID=20&ADD_FLAG=Y")
		c.ok("/shopping_cart?SHOPPING_ID=" + scid + "&I_ID=30&QTY=5&ADD_FLAG=N")
		body = c.ok("/shopping_cart?SHOPPING_ID=" + scid + "&I_ID=30&QTY=0&ADD_FLAG=N")
		if got := spanRE("qty").FindAllStringSubmatch(body, -1); len(got) != 2 || got[0][1] != "2" || got[1][1] != "2" {
			t.Fatalf("cart quantities %v, want items 10 and 20 with 2 each", got)
		}
		body = c.ok("/customer_registration?SHOPPING_ID=" + scid + "&C_ID=7")
		checkLinks(t, "/customer_registration", body)
		body = c.ok("/buy_request?SHOPPING_ID=" + scid + "&RETURNING_FLAG=Y&UNAME=u7&PASSWD=p7")
		checkLinks(t, "/buy_request", body)
		if !strings.Contains(body, "/buy_confirm?SHOPPING_ID="+scid+"&C_ID=7") {
			t.Fatalf("buy request lacks the confirm link")
		}
		var stockBefore int64
		db.QueryRow(q(`SELECT i_stock FROM item WHERE i_id = ?`), 10).Scan(&stockBefore)
		body = c.ok("/buy_confirm?SHOPPING_ID=" + scid + "&C_ID=7")
		oid := span(t, body, "order-id")
		var ocid, lines, qty, stockAfter int64
		db.QueryRow(q(`SELECT o_c_id FROM orders WHERE o_id = ?`), oid).Scan(&ocid)
		db.QueryRow(q(`SELECT COUNT(*), SUM(ol_qty) FROM order_line WHERE ol_o_id = ?`), oid).Scan(&lines, &qty)
		db.QueryRow(q(`SELECT i_stock FROM item WHERE i_id = ?`), 10).Scan(&stockAfter)
		if ocid != 7 || lines != 2 || qty != 4 {
			t.Errorf("order %s: customer %d, %d lines, %d items; want 7, 2, 4", oid, ocid, lines, qty)
		}
		if want := stockBefore - 2; want < 10 && stockAfter != want+21 || want >= 10 && stockAfter != want {
			t.Errorf("stock of item 10 went %d → %d after buying 2", stockBefore, stockAfter)
		}
		body = c.ok("/order_display?UNAME=u7&PASSWD=p7")
		if got := span(t, body, "order-id"); got != oid {
			t.Errorf("order display shows order %s, want %s", got, oid)
		}
		checkLinks(t, "/order_display", body)
		if code, _, _ := c.get("/buy_confirm?SHOPPING_ID="+scid+"&C_ID=7", ""); code != 409 {
			t.Errorf("buying an emptied cart: %d, want 409", code)
		}
	})

	t.Run("new customer", func(t *testing.T) {
		c := newC(t)
		scid := span(t, c.ok("/shopping_cart"), "shopping-id") // a random item is added
		body := c.ok("/buy_request?SHOPPING_ID=" + scid + "&RETURNING_FLAG=N")
		cid := span(t, body, "c-id")
		if n, _ := strconv.Atoi(cid); n <= 2880 {
			t.Fatalf("new customer id %s, want above the generated 2880", cid)
		}
		body = c.ok("/buy_confirm?SHOPPING_ID=" + scid + "&C_ID=" + cid)
		oid := span(t, body, "order-id")
		if got := span(t, c.ok("/order_display?UNAME=u"+cid+"&PASSWD=p"+cid), "order-id"); got != oid {
			t.Errorf("new customer's order display shows %s, want %s", got, oid)
		}
	})

	t.Run("admin", func(t *testing.T) {
		c := newC(t)
		body := c.ok("/admin_request?I_ID=77")
		checkLinks(t, "/admin_request", body)
		c.ok("/admin_confirm?I_ID=77&NEW_COST=12.34")
		if got := span(t, c.ok("/product_detail?I_ID=77"), "our-price"); got != "$12.34" {
			t.Errorf("price after admin confirm = %s, want $12.34", got)
		}
		// At full quality the related items become the five items bought
		// most (by quantity) in the recent orders that contain the item;
		// compute them in Go from the raw order lines.
		const item = 10
		var maxO int64
		db.QueryRow(`SELECT MAX(o_id) FROM orders`).Scan(&maxO)
		rows, err := db.Query(q(`SELECT ol_o_id, ol_i_id, ol_qty FROM order_line WHERE ol_o_id > ?`), maxO-relatedWindow)
		if err != nil {
			t.Fatal(err)
		}
		byOrder := map[int64][][2]int64{}
		for rows.Next() {
			var o, i, n int64
			rows.Scan(&o, &i, &n)
			byOrder[o] = append(byOrder[o], [2]int64{i, n})
		}
		rows.Close()
		sums := map[int64]int64{}
		for _, lines := range byOrder {
			if !slices.ContainsFunc(lines, func(l [2]int64) bool { return l[0] == item }) {
				continue
			}
			for _, l := range lines {
				if l[0] != item {
					sums[l[0]] += l[1]
				}
			}
		}
		var ids []int64
		for id := range sums {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool {
			if sums[ids[i]] != sums[ids[j]] {
				return sums[ids[i]] > sums[ids[j]]
			}
			return ids[i] < ids[j]
		})
		if len(ids) < 5 {
			t.Fatalf("item %d was bought with only %d other items", item, len(ids))
		}
		c.ok(fmt.Sprintf("/admin_confirm?I_ID=%d&NEW_COST=5", item))
		var rel [5]int64
		db.QueryRow(q(`SELECT i_related1, i_related2, i_related3, i_related4, i_related5 FROM item WHERE i_id = ?`), item).
			Scan(&rel[0], &rel[1], &rel[2], &rel[3], &rel[4])
		if !slices.Equal(rel[:], ids[:5]) {
			t.Errorf("related items of %d after admin confirm = %v, want %v", item, rel, ids[:5])
		}
	})

	t.Run("errors", func(t *testing.T) {
		c := newC(t)
		tests := []struct {
			path   string
			status int
			names  string
		}{
			{"/product_detail?I_ID=999999", 404, "I_ID=999999"},
			{"/product_detail?I_ID=abc", 400, "I_ID"},
			{"/product_detail", 400, "I_ID"},
			{"/new_products?SUBJECT=COMICS", 400, "SUBJECT"},
			{"/best_sellers", 400, "SUBJECT"},
			{"/home?C_ID=99999999", 404, "C_ID=99999999"},
			{"/home?C_ID=-1", 400, "C_ID"},
			{"/search_results?search_type=isbn&search_string=x", 400, "search_type"},
			{"/search_results?search_type=title", 400, "search_string"},
			{"/shopping_cart?SHOPPING_ID=99999999", 404, "SHOPPING_ID=99999999"},
			{"/shopping_cart?I_ID=5&ADD_FLAG=X", 400, "ADD_FLAG"},
			{"/shopping_cart?I_ID=5000000&ADD_FLAG=Y", 404, "I_ID=5000000"},
			{"/buy_request?SHOPPING_ID=1&RETURNING_FLAG=Y&UNAME=u1&PASSWD=p2", 403, "PASSWD"},
			{"/buy_request?SHOPPING_ID=1&RETURNING_FLAG=Y&UNAME=nobody&PASSWD=x", 404, "UNAME"},
			{"/buy_request?SHOPPING_ID=1&RETURNING_FLAG=maybe", 400, "RETURNING_FLAG"},
			{"/buy_confirm?SHOPPING_ID=1", 400, "C_ID"},
			{"/buy_confirm?SHOPPING_ID=1&C_ID=99999999", 404, "C_ID=99999999"},
			{"/order_display?UNAME=u1", 400, "PASSWD"},
			{"/admin_confirm?I_ID=1&NEW_COST=-3", 400, "NEW_COST"},
			{"/admin_confirm?I_ID=999999&NEW_COST=3", 404, "I_ID=999999"},
			{"/no_such_page", 404, "/no_such_page"},
		}
		for _, tt := range tests {
			code, body, _ := c.get(tt.path, "")
			if code != tt.status || !strings.Contains(body, tt.names) {
				t.Errorf("GET %s: %d %q, want %d naming %s", tt.path, code, body, tt.status, tt.names)
			}
		}
		if code, _, _ := c.get("/home", "1.5"); code != 400 {
			t.Errorf("bad quality header: %d, want 400", code)
		}
	})

	t.Run("every page links within the contract", func(t *testing.T) {
		c := newC(t)
		for _, p := range []string{"/home", "/search_request", "/order_inquiry?C_ID=3", "/new_products?SUBJECT=ARTS",
			"/customer_registration"} {
			checkLinks(t, p, c.ok(p))
		}
	})

	t.Run("concurrent writers", func(t *testing.T) {
		// Shoppers buying at once: on SQLite every write must wait for the
		// single writer instead of failing with SQLITE_BUSY.
		var before int
		db.QueryRow(`SELECT COUNT(*) FROM orders`).Scan(&before)
		const shoppers, rounds = 8, 6
		var wg sync.WaitGroup
		errs := make(chan string, shoppers*rounds*4)
		for s := range shoppers {
			wg.Go(func() {
				cli := srv.Client()
				get := func(path string) string {
					resp, err := cli.Get(srv.URL + path)
					if err != nil {
						errs <- err.Error()
						return ""
					}
					defer resp.Body.Close()
					body, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != 200 {
						errs <- fmt.Sprintf("%s: %d %s", path, resp.StatusCode, body)
						return ""
					}
					return string(body)
				}
				for r := range rounds {
					m := spanRE("shopping-id").FindStringSubmatch(get(fmt.Sprintf("/shopping_cart?I_ID=%d&ADD_FLAG=Y", 1+(s*rounds+r)%50)))
					if m == nil {
						continue
					}
					get(fmt.Sprintf("/shopping_cart?SHOPPING_ID=%s&I_ID=%d&QTY=3", m[1], 1+(s+r)%50))
					get(fmt.Sprintf("/admin_confirm?I_ID=%d&NEW_COST=9.99", 1+r))
					get(fmt.Sprintf("/buy_confirm?SHOPPING_ID=%s&C_ID=%d", m[1], 1+s))
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		var after int
		db.QueryRow(`SELECT COUNT(*) FROM orders`).Scan(&after)
		if after-before != shoppers*rounds {
			t.Errorf("%d orders written, want %d", after-before, shoppers*rounds)
		}
	})
}
