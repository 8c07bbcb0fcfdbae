// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
)

// The 14 TPC-W interactions, in the order of the TPC-W specification. The
// names are the bookstore testbed's URL paths without the leading "/" and
// the request types in results.
const (
	tpHome = iota
	tpNewProducts
	tpBestSellers
	tpProductDetail
	tpSearchRequest
	tpSearchResults
	tpShoppingCart
	tpCustomerRegistration
	tpBuyRequest
	tpBuyConfirm
	tpOrderInquiry
	tpOrderDisplay
	tpAdminRequest
	tpAdminConfirm
	tpN
)

// TPCWInteractions lists the interaction names in index order.
var TPCWInteractions = [tpN]string{
	"home", "new_products", "best_sellers", "product_detail",
	"search_request", "search_results", "shopping_cart",
	"customer_registration", "buy_request", "buy_confirm",
	"order_inquiry", "order_display", "admin_request", "admin_confirm",
}

// tpcwMixes are the web interaction mixes of the TPC-W specification
// (v1.8, clause 5.2.2, the "Browsing", "Shopping" and "Ordering" mixes), in
// percent, in TPCWInteractions order.
var tpcwMixes = map[string][tpN]float64{
	"browsing": {29.00, 11.00, 11.00, 21.00, 12.00, 11.00, 2.00, 0.82, 0.75, 0.69, 0.30, 0.25, 0.10, 0.09},
	"shopping": {16.00, 5.00, 5.00, 17.00, 20.00, 17.00, 11.60, 3.00, 2.60, 1.20, 0.75, 0.66, 0.10, 0.09},
	"ordering": {9.12, 0.46, 0.46, 12.35, 14.53, 13.08, 13.53, 12.86, 12.73, 10.18, 0.25, 0.22, 0.12, 0.11},
}

// tpcwPred is the page that must immediately precede an interaction, as in
// the TPC-W navigation graph: results come from a search form, the
// registration page from the cart, and so on; -1 means "reachable from any
// page".
var tpcwPred = [tpN]int{
	tpSearchResults:        tpSearchRequest,
	tpCustomerRegistration: tpShoppingCart,
	tpBuyRequest:           tpCustomerRegistration,
	tpBuyConfirm:           tpBuyRequest,
	tpOrderDisplay:         tpOrderInquiry,
	tpAdminConfirm:         tpAdminRequest,
	tpHome:                 -1, tpNewProducts: -1, tpBestSellers: -1, tpProductDetail: -1,
	tpSearchRequest: -1, tpShoppingCart: -1, tpOrderInquiry: -1, tpAdminRequest: -1,
}

// TPCWMix returns the named mix ("browsing", "shopping" or "ordering") as
// fractions summing to 1, in TPCWInteractions order.
func TPCWMix(name string) ([tpN]float64, error) {
	pct, ok := tpcwMixes[name]
	if !ok {
		return [tpN]float64{}, fmt.Errorf("mix %q: want browsing, shopping or ordering", name)
	}
	var out [tpN]float64
	for i, p := range pct {
		out[i] = p / 100
	}
	return out, nil
}

// TPCWMatrix returns the transition matrix used for a mix: P[i][j] is the
// probability that interaction j follows interaction i.
//
// The specification's own navigation matrices are not reproduced. Instead
// the matrix is built so that (a) its stationary distribution is exactly
// the mix π, and (b) the specification's page precedences hold (see
// tpcwPred: e.g. buy_confirm only follows buy_request). For an interaction
// c with required predecessor p(c), P[p][c] = π(c)/π(p); every row's
// remaining probability ρ(i) = 1 − Σ_c P[i][c] is spread over the freely
// reachable interactions F in proportion to π(F)/Σ_free π. Then the inflow
// to c is π(p)·π(c)/π(p) = π(c), and the inflow to a free F is
// Σ_i π(i)ρ(i)·π(F)/Σ_free π = π(F), because Σ_i π(i)ρ(i) = 1 − Σ_c π(c) =
// Σ_free π. So πP = π: long runs reproduce the mix's percentages, while
// sessions still reach a purchase only through cart → registration → buy
// request → buy confirm.
func TPCWMatrix(mix string) ([tpN][tpN]float64, error) {
	pi, err := TPCWMix(mix)
	if err != nil {
		return [tpN][tpN]float64{}, err
	}
	var P [tpN][tpN]float64
	freeSum := 0.0
	for j := range tpN {
		if tpcwPred[j] < 0 {
			freeSum += pi[j]
		}
	}
	for i := range tpN {
		rho := 1.0
		for c := range tpN {
			if tpcwPred[c] == i {
				P[i][c] = pi[c] / pi[i]
				rho -= P[i][c]
			}
		}
		for f := range tpN {
			if tpcwPred[f] < 0 {
				P[i][f] += rho * pi[f] / freeSum
			}
		}
	}
	return P, nil
}

// TPCW is the TPC-W-like browsing workload for the bookstore testbed. Each
// session is one emulated browser: it starts at home with a random customer
// id, walks the mix's Markov chain (TPCWMatrix), chooses valid item ids,
// subjects and customers from /_meta (preferring item ids linked from the
// previous page), and carries the SHOPPING_ID it reads from the pages
// through the session. After a successful buy_confirm the cart is
// considered spent and the next shopping_cart starts a new one. Buy
// requests are always from returning customers (UNAME=u<C_ID>,
// PASSWD=p<C_ID>), because the testbed contract defines no registration
// form fields.
type TPCW struct {
	mix       string
	rows      [tpN]picker
	items     int
	customers int
	subjects  []string
}

// NewTPCW builds the workload for a mix from a bookstore's manifest.
func NewTPCW(m *Meta, mix string) (*TPCW, error) {
	if m.Kind != "bookstore" {
		return nil, fmt.Errorf("workload tpcw: target /_meta kind is %q, want \"bookstore\" (run `sluice-lab testbed bookstore`)", m.Kind)
	}
	if m.Items < 1 || m.Customers < 1 || len(m.Subjects) == 0 {
		return nil, fmt.Errorf("workload tpcw: /_meta has items=%d customers=%d and %d subjects; need at least one of each", m.Items, m.Customers, len(m.Subjects))
	}
	P, err := TPCWMatrix(mix)
	if err != nil {
		return nil, fmt.Errorf("--mix: %v", err)
	}
	w := &TPCW{mix: mix, items: m.Items, customers: m.Customers, subjects: append([]string(nil), m.Subjects...)}
	for i := range tpN {
		w.rows[i] = newPicker(P[i][:])
	}
	return w, nil
}

// Name implements Workload.
func (w *TPCW) Name() string { return "tpcw/" + w.mix }

// NeedsBody implements Workload: sessions read SHOPPING_ID and item links
// from pages.
func (w *TPCW) NeedsBody() bool { return true }

// NewSession implements Workload.
func (w *TPCW) NewSession(r *rand.Rand) Session {
	return &tpcwSession{w: w, cur: -1, prev: -1, cid: 1 + r.IntN(w.customers)}
}

type tpcwSession struct {
	w          *TPCW
	cur, prev  int
	cid        int
	shoppingID string
	lastItem   int
	linked     []int // item ids linked from the last page
}

// syllables build author and title search strings.
var syllables = [...]string{"BA", "OG", "AL", "RI", "RE", "SE", "AT", "UL", "IN", "NG"}

func (s *tpcwSession) item(r *rand.Rand) int {
	if len(s.linked) > 0 {
		return s.linked[r.IntN(len(s.linked))]
	}
	return 1 + r.IntN(s.w.items)
}

func (s *tpcwSession) Next(r *rand.Rand) Request {
	next := tpHome
	if s.cur >= 0 {
		next = s.w.rows[s.cur].pick(r.Float64())
	}
	// Pages that need a cart fall back to the cart page when an earlier
	// failure left the session without one.
	if s.shoppingID == "" && (next == tpCustomerRegistration || next == tpBuyRequest || next == tpBuyConfirm) {
		next = tpShoppingCart
	}
	s.prev, s.cur = s.cur, next
	var b strings.Builder
	b.WriteString("/")
	b.WriteString(TPCWInteractions[next])
	subject := func() string { return url.QueryEscape(s.w.subjects[r.IntN(len(s.w.subjects))]) }
	cid := strconv.Itoa(s.cid)
	switch next {
	case tpHome:
		b.WriteString("?C_ID=" + cid)
	case tpNewProducts, tpBestSellers:
		b.WriteString("?SUBJECT=" + subject())
	case tpProductDetail:
		s.lastItem = s.item(r)
		b.WriteString("?I_ID=" + strconv.Itoa(s.lastItem))
	case tpSearchRequest, tpOrderInquiry:
	case tpSearchResults:
		switch r.IntN(3) {
		case 0:
			b.WriteString("?search_type=author&search_string=" + syllables[r.IntN(len(syllables))])
		case 1:
			b.WriteString("?search_type=title&search_string=" + syllables[r.IntN(len(syllables))])
		default:
			b.WriteString("?search_type=subject&search_string=" + subject())
		}
	case tpShoppingCart:
		add := "N"
		if s.prev == tpProductDetail || s.shoppingID == "" || s.lastItem == 0 {
			add = "Y"
			if s.prev != tpProductDetail || s.lastItem == 0 {
				s.lastItem = s.item(r)
			}
		}
		b.WriteString("?SHOPPING_ID=" + url.QueryEscape(s.shoppingID) + "&I_ID=" + strconv.Itoa(s.lastItem) + "&QTY=1&ADD_FLAG=" + add)
	case tpCustomerRegistration:
		b.WriteString("?SHOPPING_ID=" + url.QueryEscape(s.shoppingID))
	case tpBuyRequest:
		b.WriteString("?SHOPPING_ID=" + url.QueryEscape(s.shoppingID) + "&RETURNING_FLAG=Y&UNAME=u" + cid + "&PASSWD=p" + cid)
	case tpBuyConfirm:
		b.WriteString("?SHOPPING_ID=" + url.QueryEscape(s.shoppingID) + "&C_ID=" + cid)
	case tpOrderDisplay:
		b.WriteString("?UNAME=u" + cid + "&PASSWD=p" + cid)
	case tpAdminRequest:
		if s.lastItem == 0 {
			s.lastItem = s.item(r)
		}
		b.WriteString("?I_ID=" + strconv.Itoa(s.lastItem))
	case tpAdminConfirm:
		if s.lastItem == 0 {
			s.lastItem = s.item(r)
		}
		cost := 100 + r.IntN(50000) // cents
		b.WriteString(fmt.Sprintf("?I_ID=%d&NEW_COST=%d.%02d", s.lastItem, cost/100, cost%100))
	}
	return Request{Type: TPCWInteractions[next], URL: b.String()}
}

// maxLinked bounds the item ids remembered from one page.
const maxLinked = 64

func (s *tpcwSession) Observe(req Request, status int, body []byte) {
	if status < 200 || status >= 400 {
		s.linked = s.linked[:0]
		return
	}
	if req.Type == TPCWInteractions[tpBuyConfirm] {
		s.shoppingID = ""
	} else if id := paramValue(body, "SHOPPING_ID="); id != "" {
		s.shoppingID = id
	}
	s.linked = s.linked[:0]
	rest := body
	for len(s.linked) < maxLinked {
		i := indexParam(rest, "I_ID=")
		if i < 0 {
			break
		}
		rest = rest[i+len("I_ID="):]
		n, k := 0, 0
		for k < len(rest) && rest[k] >= '0' && rest[k] <= '9' && k < 10 {
			n = n*10 + int(rest[k]-'0')
			k++
		}
		if k > 0 && n >= 1 && n <= s.w.items {
			s.linked = append(s.linked, n)
		}
	}
}

// indexParam finds key in body where it starts a query parameter (after
// '?', '&', "&amp;" or ';'), so "I_ID=" does not match inside "XI_ID=".
func indexParam(body []byte, key string) int {
	off := 0
	for {
		i := bytes.Index(body[off:], []byte(key))
		if i < 0 {
			return -1
		}
		j := off + i
		if j == 0 || body[j-1] == '?' || body[j-1] == '&' || body[j-1] == ';' {
			return j
		}
		off = j + 1
	}
}

// paramValue returns the first non-empty value of the query parameter key
// ("NAME=") in body, up to the next delimiter.
func paramValue(body []byte, key string) string {
	rest := body
	for {
		i := indexParam(rest, key)
		if i < 0 {
			return ""
		}
		rest = rest[i+len(key):]
		k := 0
		for k < len(rest) && k < 128 && !strings.ContainsRune("&\"'<> \t\r\n#;", rune(rest[k])) {
			k++
		}
		if k > 0 {
			v, err := url.QueryUnescape(string(rest[:k]))
			if err == nil && v != "" {
				return v
			}
		}
	}
}
