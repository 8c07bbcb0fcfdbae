// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// TPC-W's browsing interactions (home, new products, best sellers,
// product detail, search request and results) and the routing table; the
// order interactions are in bookstore_order.go.

// pages returns the routing table of the 14 interactions.
func (b *Bookstore) pages() map[string]bookstorePage {
	return map[string]bookstorePage{
		"/home":                  b.home,
		"/new_products":          b.newProducts,
		"/best_sellers":          b.bestSellers,
		"/product_detail":        b.productDetail,
		"/search_request":        b.searchRequest,
		"/search_results":        b.searchResults,
		"/shopping_cart":         b.shoppingCart,
		"/customer_registration": b.customerRegistration,
		"/buy_request":           b.buyRequest,
		"/buy_confirm":           b.buyConfirm,
		"/order_inquiry":         b.orderInquiry,
		"/order_display":         b.orderDisplay,
		"/admin_request":         b.adminRequest,
		"/admin_confirm":         b.adminConfirm,
	}
}

// listedItem is one row of an item listing.
type listedItem struct {
	id           int64
	title        string
	fname, lname string
	qty          int64 // best sellers only
}

func queryItems(ctx context.Context, st *sql.Stmt, withQty bool, args ...any) ([]listedItem, error) {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []listedItem
	for rows.Next() {
		var it listedItem
		dst := []any{&it.id, &it.title, &it.fname, &it.lname}
		if withQty {
			dst = append(dst, &it.qty)
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// itemListing writes items as a list of links to product detail.
func (p *page) itemListing(items []listedItem, withQty bool) {
	if len(items) == 0 {
		p.raw("<p>No items.</p>\n")
		return
	}
	p.raw("<ol class=\"items\">\n")
	for _, it := range items {
		p.raw("<li>")
		p.link(it.title, "/product_detail", "I_ID", strconv.FormatInt(it.id, 10))
		p.raw(" by ")
		p.text(it.fname + " " + it.lname)
		if withQty {
			p.raw(` — <span class="qty">`)
			p.raw(strconv.FormatInt(it.qty, 10))
			p.raw("</span> sold")
		}
		p.raw("</li>\n")
	}
	p.raw("</ol>\n")
}

// recentOrderFloor returns the id above which orders are among the n most
// recent.
func (b *Bookstore) recentOrderFloor(ctx context.Context, n int64) (int64, error) {
	var maxID int64
	if err := b.q.maxOrder.QueryRowContext(ctx).Scan(&maxID); err != nil {
		return 0, err
	}
	return maxID - n, nil
}

// promotions writes five items related to a random item (skipped at low
// quality).
func (b *Bookstore) promotions(ctx context.Context, req *bsRequest) error {
	if !req.full {
		return nil
	}
	var rel [5]int64
	seed := req.rng.Int64N(int64(b.items)) + 1
	if err := b.q.itemRelated.QueryRowContext(ctx, seed).Scan(&rel[0], &rel[1], &rel[2], &rel[3], &rel[4]); err != nil {
		return fmt.Errorf("promotions: %w", err)
	}
	rows, err := b.q.itemsByID5.QueryContext(ctx, rel[0], rel[1], rel[2], rel[3], rel[4])
	if err != nil {
		return fmt.Errorf("promotions: %w", err)
	}
	defer rows.Close()
	p := req.p
	p.raw("<div class=\"promotions\"><h3>Promotions</h3><ul>\n")
	for rows.Next() {
		var id, cost int64
		var title, thumb string
		if err := rows.Scan(&id, &title, &thumb, &cost); err != nil {
			return err
		}
		p.raw("<li>")
		p.link(title, "/product_detail", "I_ID", strconv.FormatInt(id, 10))
		p.raw(" ")
		p.text(money(cost))
		p.raw("</li>\n")
	}
	p.raw("</ul></div>\n")
	return rows.Err()
}

// subjectParam returns the upper-cased SUBJECT parameter, which must be one
// of BookstoreSubjects.
func subjectParam(req *bsRequest) (string, error) {
	v := req.str("SUBJECT")
	s := strings.ToUpper(v)
	if !slices.Contains(BookstoreSubjects, s) {
		if v == "" {
			return "", badParam("SUBJECT", v, "required")
		}
		return "", badParam("SUBJECT", v, "unknown subject")
	}
	return s, nil
}

// home: greeting, promotions, best-seller sidebar, subject links.
func (b *Bookstore) home(ctx context.Context, req *bsRequest) error {
	cid, err := req.id("C_ID", false)
	if err != nil {
		return err
	}
	p := req.p
	p.head("Home")
	if cid > 0 {
		var fn, ln string
		err := b.q.customerName.QueryRowContext(ctx, cid).Scan(&fn, &ln)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("customer C_ID=%d not found", cid)
		}
		if err != nil {
			return err
		}
		p.raw("<p class=\"greeting\">Welcome back, ")
		p.text(fn + " " + ln)
		p.raw("!</p>\n")
	} else {
		p.raw("<p class=\"greeting\">Welcome, guest.</p>\n")
	}
	if err := b.promotions(ctx, req); err != nil {
		return err
	}
	if req.full {
		floor, err := b.recentOrderFloor(ctx, bestSellerWindow)
		if err != nil {
			return err
		}
		top, err := queryItems(ctx, b.q.bestSellersAll, true, floor)
		if err != nil {
			return fmt.Errorf("best-seller sidebar: %w", err)
		}
		p.raw("<div class=\"sidebar\"><h3>Best sellers</h3>\n")
		p.itemListing(top, true)
		p.raw("</div>\n")
	}
	p.raw("<h2>Subjects</h2>\n<ul class=\"subjects\">\n")
	for _, s := range BookstoreSubjects {
		p.raw("<li>")
		p.text(s)
		p.raw(": ")
		p.link("new", "/new_products", "SUBJECT", s)
		p.raw(" ")
		p.link("best sellers", "/best_sellers", "SUBJECT", s)
		p.raw("</li>\n")
	}
	p.raw("</ul>\n<p>")
	p.link("Register or sign in", "/customer_registration")
	p.raw("</p>\n")
	p.foot()
	return nil
}

// new_products: the 50 newest items of a subject.
func (b *Bookstore) newProducts(ctx context.Context, req *bsRequest) error {
	subject, err := subjectParam(req)
	if err != nil {
		return err
	}
	items, err := queryItems(ctx, b.q.newProducts, false, subject)
	if err != nil {
		return err
	}
	p := req.p
	p.head("New products: " + subject)
	if err := b.promotions(ctx, req); err != nil {
		return err
	}
	p.itemListing(items, false)
	p.foot()
	return nil
}

// best_sellers: the 50 items of a subject sold most in the 3333 most recent
// orders.
func (b *Bookstore) bestSellers(ctx context.Context, req *bsRequest) error {
	subject, err := subjectParam(req)
	if err != nil {
		return err
	}
	floor, err := b.recentOrderFloor(ctx, bestSellerWindow)
	if err != nil {
		return err
	}
	items, err := queryItems(ctx, b.q.bestSellers, true, floor, subject)
	if err != nil {
		return err
	}
	p := req.p
	p.head("Best sellers: " + subject)
	if err := b.promotions(ctx, req); err != nil {
		return err
	}
	p.itemListing(items, true)
	p.foot()
	return nil
}

// product_detail: one item, with related items at full quality.
func (b *Bookstore) productDetail(ctx context.Context, req *bsRequest) error {
	iid, err := req.id("I_ID", true)
	if err != nil {
		return err
	}
	var (
		title, fn, ln, publisher, subject, desc, thumb, image, isbn, backing, dims string
		pub, srp, cost, avail, stock, pages                                        int64
		rel                                                                        [5]int64
	)
	err = b.q.product.QueryRowContext(ctx, iid).Scan(&title, &fn, &ln, &pub, &publisher, &subject, &desc,
		&thumb, &image, &srp, &cost, &avail, &stock, &isbn, &pages, &backing, &dims,
		&rel[0], &rel[1], &rel[2], &rel[3], &rel[4])
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("item I_ID=%d not found", iid)
	}
	if err != nil {
		return err
	}
	id := strconv.FormatInt(iid, 10)
	p := req.p
	p.head("Product detail")
	p.raw(`<h2 class="title">`)
	p.text(title)
	p.raw("</h2>\n<p>by <span class=\"author\">")
	p.text(fn + " " + ln)
	p.raw("</span></p>\n<table class=\"detail\">\n")
	row := func(k, v string) {
		p.raw("<tr><th>")
		p.text(k)
		p.raw("</th><td class=\"")
		p.raw(strings.ToLower(strings.ReplaceAll(k, " ", "-")))
		p.raw("\">")
		p.text(v)
		p.raw("</td></tr>\n")
	}
	row("Subject", subject)
	row("Publisher", publisher)
	row("Published", day(pub))
	row("ISBN", isbn)
	row("Pages", strconv.FormatInt(pages, 10))
	row("Backing", backing)
	row("Dimensions", dims)
	row("List price", money(srp))
	row("Our price", money(cost))
	row("You save", money(srp-cost))
	row("Available", day(avail))
	row("Stock", strconv.FormatInt(stock, 10))
	p.raw("</table>\n<p class=\"desc\">")
	p.text(desc)
	p.raw("</p>\n<p>")
	p.link("Add to cart", "/shopping_cart", "I_ID", id, "QTY", "1", "ADD_FLAG", "Y")
	p.raw(" | ")
	p.link("Update this item (admin)", "/admin_request", "I_ID", id)
	p.raw("</p>\n")
	if req.full {
		rows, err := b.q.itemsByID5.QueryContext(ctx, rel[0], rel[1], rel[2], rel[3], rel[4])
		if err != nil {
			return fmt.Errorf("related items: %w", err)
		}
		defer rows.Close()
		p.raw("<div class=\"related\"><h3>Related items</h3><ul>\n")
		for rows.Next() {
			var rid, rcost int64
			var rtitle, rthumb string
			if err := rows.Scan(&rid, &rtitle, &rthumb, &rcost); err != nil {
				return err
			}
			p.raw("<li>")
			p.link(rtitle, "/product_detail", "I_ID", strconv.FormatInt(rid, 10))
			p.raw("</li>\n")
		}
		if err := rows.Err(); err != nil {
			return err
		}
		p.raw("</ul></div>\n")
	}
	p.foot()
	return nil
}

// search_request: the search form and example searches.
func (b *Bookstore) searchRequest(ctx context.Context, req *bsRequest) error {
	p := req.p
	p.head("Search")
	if err := b.promotions(ctx, req); err != nil {
		return err
	}
	p.raw(`<form action="/search_results" method="get">
<select name="search_type"><option value="author">Author</option><option value="title">Title</option><option value="subject">Subject</option></select>
<input name="search_string" size="30">
`)
	for _, kv := range [][2]string{{"SHOPPING_ID", p.sess.shoppingID}, {"C_ID", p.sess.cID}} {
		if kv[1] != "" {
			p.raw(`<input type="hidden" name="` + kv[0] + `" value="` + kv[1] + `">` + "\n")
		}
	}
	p.raw("<input type=\"submit\" value=\"Search\"></form>\n<p>Try: ")
	p.link("a title", "/search_results", "search_type", "title", "search_string", pick(req.rng, titleWords))
	p.raw(" | ")
	p.link("an author", "/search_results", "search_type", "author", "search_string", pick(req.rng, lastNames))
	p.raw(" | ")
	p.link("a subject", "/search_results", "search_type", "subject", "search_string", pick(req.rng, BookstoreSubjects))
	p.raw("</p>\n")
	p.foot()
	return nil
}

// likeEscape escapes the LIKE wildcards of s for ESCAPE '\'.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// search_results: author last names by prefix, titles by substring
// (case-insensitive LIKE), or a subject; 50 results at most.
func (b *Bookstore) searchResults(ctx context.Context, req *bsRequest) error {
	typ := strings.ToLower(req.str("search_type"))
	str := req.str("search_string")
	if typ != "author" && typ != "title" && typ != "subject" {
		return badParam("search_type", req.str("search_type"), "want author, title or subject")
	}
	if str == "" || len(str) > 100 {
		return badParam("search_string", str, "want 1 to 100 characters")
	}
	var items []listedItem
	var err error
	switch typ {
	case "author":
		items, err = queryItems(ctx, b.q.searchAuthor, false, likeEscape(strings.ToLower(str))+"%")
	case "title":
		items, err = queryItems(ctx, b.q.searchTitle, false, "%"+likeEscape(strings.ToLower(str))+"%")
	default:
		items, err = queryItems(ctx, b.q.searchSubject, false, strings.ToUpper(str))
	}
	if err != nil {
		return err
	}
	p := req.p
	p.head("Search results")
	if err := b.promotions(ctx, req); err != nil {
		return err
	}
	p.raw("<p>")
	p.textf("%d results for %s %q", len(items), typ, str)
	p.raw("</p>\n")
	p.itemListing(items, false)
	p.foot()
	return nil
}
