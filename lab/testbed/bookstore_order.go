// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TPC-W's order interactions (shopping cart, customer registration, buy
// request and confirm, order inquiry and display, admin request and
// confirm); the browsing ones are in bookstore_pages.go.

// cartLine is one line of a shopping cart.
type cartLine struct {
	iid, qty, cost, srp int64
	title, backing      string
}

func (b *Bookstore) readCart(ctx context.Context, scid int64) ([]cartLine, error) {
	rows, err := b.q.cartLines.QueryContext(ctx, scid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []cartLine
	for rows.Next() {
		var l cartLine
		if err := rows.Scan(&l.iid, &l.qty, &l.title, &l.cost, &l.srp, &l.backing); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// cartTable writes the lines and returns the subtotal in cents.
func (p *page) cartTable(lines []cartLine, editable bool) (sub, qty int64) {
	p.raw("<table class=\"cart\">\n<tr><th>Qty</th><th>Item</th><th>Backing</th><th>Price</th><th>Total</th></tr>\n")
	for _, l := range lines {
		id := strconv.FormatInt(l.iid, 10)
		p.raw("<tr><td class=\"qty\">")
		p.raw(strconv.FormatInt(l.qty, 10))
		p.raw("</td><td>")
		p.link(l.title, "/product_detail", "I_ID", id)
		if editable {
			p.raw(" (")
			p.link("remove", "/shopping_cart", "I_ID", id, "QTY", "0", "ADD_FLAG", "N")
			p.raw(")")
		}
		p.raw("</td><td>")
		p.text(l.backing)
		p.raw("</td><td>")
		p.text(money(l.cost))
		p.raw("</td><td>")
		p.text(money(l.cost * l.qty))
		p.raw("</td></tr>\n")
		sub += l.cost * l.qty
		qty += l.qty
	}
	p.raw("</table>\n<p>Subtotal: <span class=\"subtotal\">")
	p.text(money(sub))
	p.raw("</span></p>\n")
	return sub, qty
}

// shopping_cart: creates a cart when SHOPPING_ID is empty, adds (ADD_FLAG=Y)
// or sets the quantity of (QTY, 0 removes) item I_ID, adds a random item to
// an empty cart as TPC-W does, and shows the cart.
func (b *Bookstore) shoppingCart(ctx context.Context, req *bsRequest) error {
	iid, err := req.id("I_ID", false)
	if err != nil {
		return err
	}
	scid, err := req.id("SHOPPING_ID", false)
	if err != nil {
		return err
	}
	flag := strings.ToUpper(req.str("ADD_FLAG"))
	if flag != "" && flag != "Y" && flag != "N" {
		return badParam("ADD_FLAG", req.str("ADD_FLAG"), "want Y or N")
	}
	qty := int64(-1)
	if v := req.str("QTY"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 10000 {
			return badParam("QTY", v, "want an integer in 0..10000")
		}
		qty = n
	}
	if (flag == "Y" || qty >= 0) && iid == 0 {
		return badParam("I_ID", "", "required with ADD_FLAG=Y or QTY")
	}
	now := time.Now().Unix()
	tx, err := b.db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if scid == 0 {
		if err := tx.StmtContext(ctx, b.q.newCart).QueryRowContext(ctx, now).Scan(&scid); err != nil {
			return fmt.Errorf("creating cart: %w", err)
		}
	} else {
		var x int64
		err := tx.StmtContext(ctx, b.q.cartExistsW).QueryRowContext(ctx, scid).Scan(&x)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("cart SHOPPING_ID=%d not found", scid)
		}
		if err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, b.q.touchCart).ExecContext(ctx, now, scid); err != nil {
			return err
		}
	}
	if iid > 0 {
		var x int64
		err := tx.StmtContext(ctx, b.q.itemExistsW).QueryRowContext(ctx, iid).Scan(&x)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("item I_ID=%d not found", iid)
		}
		if err != nil {
			return err
		}
		switch {
		case flag == "Y":
			if _, err := tx.StmtContext(ctx, b.q.addLine).ExecContext(ctx, scid, iid, max(qty, 1)); err != nil {
				return err
			}
		case qty == 0:
			if _, err := tx.StmtContext(ctx, b.q.delLine).ExecContext(ctx, scid, iid); err != nil {
				return err
			}
		case qty > 0:
			if _, err := tx.StmtContext(ctx, b.q.setLine).ExecContext(ctx, scid, iid, qty); err != nil {
				return err
			}
		}
	}
	var n int64
	if err := tx.StmtContext(ctx, b.q.countLines).QueryRowContext(ctx, scid).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		rnd := req.rng.Int64N(int64(b.items)) + 1
		if _, err := tx.StmtContext(ctx, b.q.addLine).ExecContext(ctx, scid, rnd, 1); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	lines, err := b.readCart(ctx, scid)
	if err != nil {
		return err
	}
	p := req.p
	p.sess.shoppingID = strconv.FormatInt(scid, 10)
	p.head("Shopping cart")
	p.raw(`<p>Cart <span class="shopping-id">` + p.sess.shoppingID + "</span></p>\n")
	p.cartTable(lines, true)
	p.raw("<p>")
	p.link("Check out", "/customer_registration")
	p.raw(" | ")
	p.link("Continue shopping", "/home")
	p.raw("</p>\n")
	p.foot()
	return nil
}

// customer_registration: sign-in and registration form before buying.
func (b *Bookstore) customerRegistration(ctx context.Context, req *bsRequest) error {
	p := req.p
	p.head("Customer registration")
	p.raw(`<form action="/buy_request" method="get">
<input type="hidden" name="RETURNING_FLAG" value="Y">
User name <input name="UNAME"> Password <input name="PASSWD" type="password">
`)
	if p.sess.shoppingID != "" {
		p.raw(`<input type="hidden" name="SHOPPING_ID" value="` + p.sess.shoppingID + "\">\n")
	}
	p.raw("<input type=\"submit\" value=\"Sign in\"></form>\n<p>")
	if p.sess.cID != "" {
		p.link("Continue as customer "+p.sess.cID, "/buy_request", "RETURNING_FLAG", "Y",
			"UNAME", "u"+p.sess.cID, "PASSWD", "p"+p.sess.cID)
		p.raw(" | ")
	}
	p.link("New customer", "/buy_request", "RETURNING_FLAG", "N")
	p.raw("</p>\n")
	p.foot()
	return nil
}

// customer is the part of a customer row the pages show.
type customer struct {
	id                    int64
	uname, passwd, fn, ln string
	discount, addrID      int64
	email, phone          string
}

// authenticate returns the customer with UNAME and PASSWD, or a 400, 404 or
// 403 error.
func (b *Bookstore) authenticate(ctx context.Context, req *bsRequest) (customer, error) {
	c := customer{uname: req.str("UNAME")}
	pw := req.str("PASSWD")
	if c.uname == "" {
		return c, badParam("UNAME", "", "required")
	}
	if pw == "" {
		return c, badParam("PASSWD", "", "required")
	}
	err := b.q.customerByUname.QueryRowContext(ctx, c.uname).Scan(&c.id, &c.passwd, &c.fn, &c.ln,
		&c.discount, &c.addrID, &c.email, &c.phone)
	if errors.Is(err, sql.ErrNoRows) {
		return c, notFound("customer UNAME=%q not found", c.uname)
	}
	if err != nil {
		return c, err
	}
	if pw != c.passwd {
		return c, &httpError{http.StatusForbidden, fmt.Sprintf("wrong PASSWD for UNAME=%q", c.uname)}
	}
	return c, nil
}

// address writes the address addrID.
func (b *Bookstore) writeAddress(ctx context.Context, p *page, label string, addrID int64) error {
	var s1, s2, city, state, zip, country string
	err := b.q.address.QueryRowContext(ctx, addrID).Scan(&s1, &s2, &city, &state, &zip, &country)
	if err != nil {
		return fmt.Errorf("address %d: %w", addrID, err)
	}
	p.raw("<p class=\"address\"><b>")
	p.text(label)
	p.raw("</b><br>")
	p.text(s1 + ", " + s2)
	p.raw("<br>")
	p.text(city + ", " + state + " " + zip)
	p.raw("<br>")
	p.text(country)
	p.raw("</p>\n")
	return nil
}

// buy_request: signs a returning customer in (RETURNING_FLAG=Y, UNAME,
// PASSWD) or registers a new one (RETURNING_FLAG=N), and shows the order
// to confirm.
func (b *Bookstore) buyRequest(ctx context.Context, req *bsRequest) error {
	scid, err := req.id("SHOPPING_ID", true)
	if err != nil {
		return err
	}
	flag := strings.ToUpper(req.str("RETURNING_FLAG"))
	if flag != "Y" && flag != "N" {
		return badParam("RETURNING_FLAG", req.str("RETURNING_FLAG"), "want Y or N")
	}
	var x int64
	err = b.q.cartExists.QueryRowContext(ctx, scid).Scan(&x)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("cart SHOPPING_ID=%d not found", scid)
	}
	if err != nil {
		return err
	}
	now := time.Now().Unix()
	var c customer
	if flag == "Y" {
		if c, err = b.authenticate(ctx, req); err != nil {
			return err
		}
		if _, err := b.q.login.ExecContext(ctx, now, now+2*3600, c.id); err != nil {
			return err
		}
	} else if c, err = b.register(ctx, req, now); err != nil {
		return err
	}
	lines, err := b.readCart(ctx, scid)
	if err != nil {
		return err
	}
	p := req.p
	p.sess.cID = strconv.FormatInt(c.id, 10)
	p.head("Buy request")
	p.raw(`<p>Customer <span class="c-id">` + p.sess.cID + `</span>: `)
	p.text(c.fn + " " + c.ln + " (" + c.uname + ", " + c.email + ")")
	p.raw("</p>\n")
	if err := b.writeAddress(ctx, p, "Billing and shipping address", c.addrID); err != nil {
		return err
	}
	sub, qty := p.cartTable(lines, false)
	sub = sub * (100 - c.discount) / 100
	tax := sub * 825 / 10000
	ship := 300 + 100*qty
	p.textf("Discount %d%%, subtotal after discount %s, tax %s, shipping %s, total ", c.discount, money(sub), money(tax), money(ship))
	p.raw(`<span class="total">`)
	p.text(money(sub + tax + ship))
	p.raw("</span>\n<p>")
	p.link("Confirm order", "/buy_confirm", "SHOPPING_ID", strconv.FormatInt(scid, 10), "C_ID", p.sess.cID)
	p.raw("</p>\n")
	p.foot()
	return nil
}

// register creates a customer with random details and an address; its
// user name is u<C_ID> and its password p<C_ID>.
func (b *Bookstore) register(ctx context.Context, req *bsRequest, now int64) (customer, error) {
	r := req.rng
	c := customer{fn: pick(r, firstNames), ln: pick(r, lastNames), discount: between(r, 0, 50), phone: digits(r, 10)}
	c.email = strings.ToLower(c.fn+"."+c.ln) + "@example.com"
	tx, err := b.db.write.BeginTx(ctx, nil)
	if err != nil {
		return c, err
	}
	defer tx.Rollback()
	err = tx.StmtContext(ctx, b.q.newAddress).QueryRowContext(ctx,
		fmt.Sprintf("%d %s St", between(r, 1, 9999), capitalize(pick(r, titleWords))),
		fmt.Sprintf("Apt %d", between(r, 1, 999)), pick(r, cities), pick(r, states), digits(r, 5),
		between(r, 1, int64(len(countries)))).Scan(&c.addrID)
	if err != nil {
		return c, fmt.Errorf("new address: %w", err)
	}
	err = tx.StmtContext(ctx, b.q.newCustomer).QueryRowContext(ctx, c.fn, c.ln, c.addrID, c.phone, c.email,
		now, now, now, now+2*3600, c.discount, 0, 0, now-between(r, 18*365, 80*365)*86400,
		words(r, 10, 30)).Scan(&c.id)
	if err != nil {
		return c, fmt.Errorf("new customer: %w", err)
	}
	c.uname, c.passwd = "u"+strconv.FormatInt(c.id, 10), "p"+strconv.FormatInt(c.id, 10)
	if _, err := tx.StmtContext(ctx, b.q.setUname).ExecContext(ctx, c.uname, c.passwd, c.id); err != nil {
		return c, err
	}
	return c, tx.Commit()
}

// buy_confirm: one transaction that turns the cart into an order with its
// lines and card transaction, updates stock and empties the cart.
func (b *Bookstore) buyConfirm(ctx context.Context, req *bsRequest) error {
	scid, err := req.id("SHOPPING_ID", true)
	if err != nil {
		return err
	}
	cid, err := req.id("C_ID", true)
	if err != nil {
		return err
	}
	r := req.rng
	now := time.Now().Unix()
	tx, err := b.db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var c customer
	var country int64
	err = tx.StmtContext(ctx, b.q.customerForBuy).QueryRowContext(ctx, cid).Scan(&c.uname, &c.passwd, &c.fn, &c.ln,
		&c.discount, &c.addrID, &country)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("customer C_ID=%d not found", cid)
	}
	if err != nil {
		return err
	}
	var x int64
	err = tx.StmtContext(ctx, b.q.cartExistsW).QueryRowContext(ctx, scid).Scan(&x)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("cart SHOPPING_ID=%d not found", scid)
	}
	if err != nil {
		return err
	}
	type line struct{ iid, qty, cost int64 }
	var lines []line
	rows, err := tx.StmtContext(ctx, b.q.cartLinesW).QueryContext(ctx, scid)
	if err != nil {
		return err
	}
	for rows.Next() {
		var l line
		if err := rows.Scan(&l.iid, &l.qty, &l.cost); err != nil {
			rows.Close()
			return err
		}
		lines = append(lines, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(lines) == 0 {
		return &httpError{http.StatusConflict, fmt.Sprintf("cart SHOPPING_ID=%d is empty", scid)}
	}
	var sub, qty int64
	for _, l := range lines {
		sub += l.cost * l.qty
		qty += l.qty
	}
	sub = sub * (100 - c.discount) / 100
	tax := sub * 825 / 10000
	total := sub + tax + 300 + 100*qty
	var oid int64
	err = tx.StmtContext(ctx, b.q.newOrder).QueryRowContext(ctx, cid, now, sub, tax, total, pick(r, shipTypes),
		now+between(r, 1, 7)*86400, c.addrID, c.addrID, "PENDING").Scan(&oid)
	if err != nil {
		return fmt.Errorf("new order: %w", err)
	}
	insLine := tx.StmtContext(ctx, b.q.newOrderLine)
	stock := tx.StmtContext(ctx, b.q.updateStock)
	for k, l := range lines { // ordered by item id, so concurrent buyers lock rows in one order
		if _, err := insLine.ExecContext(ctx, k+1, oid, l.iid, l.qty, c.discount, words(r, 3, 10)); err != nil {
			return fmt.Errorf("order line: %w", err)
		}
		if _, err := stock.ExecContext(ctx, l.qty, l.qty, l.qty, l.iid); err != nil {
			return fmt.Errorf("stock of item %d: %w", l.iid, err)
		}
	}
	if _, err := tx.StmtContext(ctx, b.q.newXact).ExecContext(ctx, oid, pick(r, ccTypes), digits(r, 16),
		c.fn+" "+c.ln, now+between(r, 30, 730)*86400, digits(r, 15), total, now, country); err != nil {
		return fmt.Errorf("card transaction: %w", err)
	}
	if _, err := tx.StmtContext(ctx, b.q.clearCart).ExecContext(ctx, scid); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	p := req.p
	p.sess.cID = strconv.FormatInt(cid, 10)
	p.head("Order confirmed")
	p.raw(`<p>Order <span class="order-id">` + strconv.FormatInt(oid, 10) + "</span> for ")
	p.text(c.fn + " " + c.ln)
	p.raw(", total <span class=\"total\">")
	p.text(money(total))
	p.raw("</span></p>\n<p>")
	p.link("Show order", "/order_display", "UNAME", c.uname, "PASSWD", c.passwd)
	p.raw(" | ")
	p.link("Continue shopping", "/home")
	p.raw("</p>\n")
	p.foot()
	return nil
}

// order_inquiry: the sign-in form for order display.
func (b *Bookstore) orderInquiry(ctx context.Context, req *bsRequest) error {
	p := req.p
	p.head("Order inquiry")
	p.raw(`<form action="/order_display" method="get">
User name <input name="UNAME"> Password <input name="PASSWD" type="password">
<input type="submit" value="Show last order"></form>
`)
	if p.sess.cID != "" {
		p.raw("<p>")
		p.link("Last order of customer "+p.sess.cID, "/order_display", "UNAME", "u"+p.sess.cID, "PASSWD", "p"+p.sess.cID)
		p.raw("</p>\n")
	}
	p.foot()
	return nil
}

// order_display: the most recent order of the signed-in customer.
func (b *Bookstore) orderDisplay(ctx context.Context, req *bsRequest) error {
	c, err := b.authenticate(ctx, req)
	if err != nil {
		return err
	}
	var (
		oid, date, sub, tax, total, shipDate, bill, ship int64
		shipType, status                                 string
	)
	err = b.q.lastOrder.QueryRowContext(ctx, c.id).Scan(&oid, &date, &sub, &tax, &total, &shipType, &shipDate,
		&status, &bill, &ship)
	p := req.p
	p.sess.cID = strconv.FormatInt(c.id, 10)
	if errors.Is(err, sql.ErrNoRows) {
		p.head("Order display")
		p.text(fmt.Sprintf("%s %s has no orders.", c.fn, c.ln))
		p.foot()
		return nil
	}
	if err != nil {
		return err
	}
	var ccType, auth string
	var amount int64
	if err := b.q.ccXact.QueryRowContext(ctx, oid).Scan(&ccType, &auth, &amount); err != nil {
		return fmt.Errorf("card transaction of order %d: %w", oid, err)
	}
	rows, err := b.q.orderLines.QueryContext(ctx, oid)
	if err != nil {
		return err
	}
	defer rows.Close()
	p.head("Order display")
	p.raw(`<p>Order <span class="order-id">` + strconv.FormatInt(oid, 10) + "</span> of ")
	p.text(c.fn + " " + c.ln)
	p.textf(", placed %s, status %s, shipped by %s on %s. Paid %s by %s (auth %s).", day(date), status, shipType,
		day(shipDate), money(amount), ccType, auth)
	p.raw("</p>\n<table class=\"lines\">\n<tr><th>Item</th><th>Publisher</th><th>Price</th><th>Qty</th><th>Discount</th><th>Comments</th></tr>\n")
	for rows.Next() {
		var iid, cost, qty, disc int64
		var title, publisher, comments string
		if err := rows.Scan(&iid, &title, &publisher, &cost, &qty, &disc, &comments); err != nil {
			return err
		}
		p.raw("<tr><td>")
		p.link(title, "/product_detail", "I_ID", strconv.FormatInt(iid, 10))
		p.raw("</td><td>")
		p.text(publisher)
		p.raw("</td><td>")
		p.text(money(cost))
		p.raw("</td><td class=\"qty\">")
		p.raw(strconv.FormatInt(qty, 10))
		p.raw("</td><td>")
		p.textf("%d%%", disc)
		p.raw("</td><td>")
		p.text(comments)
		p.raw("</td></tr>\n")
	}
	if err := rows.Err(); err != nil {
		return err
	}
	p.raw("</table>\n")
	p.textf("Subtotal %s, tax %s, total ", money(sub), money(tax))
	p.raw(`<span class="total">`)
	p.text(money(total))
	p.raw("</span>\n")
	if err := b.writeAddress(ctx, p, "Billing address", bill); err != nil {
		return err
	}
	if err := b.writeAddress(ctx, p, "Shipping address", ship); err != nil {
		return err
	}
	p.foot()
	return nil
}

// admin_request: an item with the form to change its cost.
func (b *Bookstore) adminRequest(ctx context.Context, req *bsRequest) error {
	iid, err := req.id("I_ID", true)
	if err != nil {
		return err
	}
	var title, thumb string
	var cost, srp, stock, pub int64
	err = b.q.itemBrief.QueryRowContext(ctx, iid).Scan(&title, &cost, &srp, &thumb, &stock, &pub)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("item I_ID=%d not found", iid)
	}
	if err != nil {
		return err
	}
	id := strconv.FormatInt(iid, 10)
	p := req.p
	p.head("Admin request")
	p.raw(`<h2 class="title">`)
	p.text(title)
	p.raw("</h2>\n<p>Cost <span class=\"cost\">")
	p.text(money(cost))
	p.raw("</span>, list price ")
	p.text(money(srp))
	p.raw("</p>\n<form action=\"/admin_confirm\" method=\"get\"><input type=\"hidden\" name=\"I_ID\" value=\"" + id + "\">\n")
	p.raw("New cost <input name=\"NEW_COST\"><input type=\"submit\" value=\"Update\"></form>\n<p>")
	suggest := float64(cost*9/10) / 100
	p.link("Reduce cost by 10%", "/admin_confirm", "I_ID", id, "NEW_COST", strconv.FormatFloat(max(suggest, 0.01), 'f', 2, 64))
	p.raw("</p>\n")
	p.foot()
	return nil
}

// admin_confirm: sets an item's cost and publication date and, at full
// quality, recomputes its related items from the orders that contain it
// among the 10000 most recent.
func (b *Bookstore) adminConfirm(ctx context.Context, req *bsRequest) error {
	iid, err := req.id("I_ID", true)
	if err != nil {
		return err
	}
	v := req.str("NEW_COST")
	dollars, err := strconv.ParseFloat(v, 64)
	if v == "" || err != nil || math.IsNaN(dollars) || dollars <= 0 || dollars > 100000 {
		return badParam("NEW_COST", v, "want a price in dollars, 0 < NEW_COST ≤ 100000")
	}
	cents := int64(math.Round(dollars * 100))
	var related []int64
	var old [5]int64
	if req.full {
		floor, err := b.recentOrderFloor(ctx, relatedWindow)
		if err != nil {
			return err
		}
		rows, err := b.q.relatedCompute.QueryContext(ctx, iid, floor, iid)
		if err != nil {
			return fmt.Errorf("related items: %w", err)
		}
		for rows.Next() {
			var id, qty int64
			if err := rows.Scan(&id, &qty); err != nil {
				rows.Close()
				return err
			}
			related = append(related, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// Read before the write transaction: on a one-connection pool the
		// transaction would hold the only connection.
		err = b.q.itemRelated.QueryRowContext(ctx, iid).Scan(&old[0], &old[1], &old[2], &old[3], &old[4])
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("item I_ID=%d not found", iid)
		}
		if err != nil {
			return err
		}
	}
	now := time.Now().Unix()
	tx, err := b.db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.StmtContext(ctx, b.q.updateItem).ExecContext(ctx, cents, now, iid)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return notFound("item I_ID=%d not found", iid)
	}
	if len(related) > 0 {
		for _, o := range old {
			if len(related) == 5 {
				break
			}
			if !slices.Contains(related, o) {
				related = append(related, o)
			}
		}
		for len(related) < 5 {
			related = append(related, old[len(related)])
		}
		if _, err := tx.StmtContext(ctx, b.q.updateRelated).ExecContext(ctx, related[0], related[1], related[2],
			related[3], related[4], iid); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	p := req.p
	p.head("Admin confirm")
	p.raw("<p>Item ")
	p.link(strconv.FormatInt(iid, 10), "/product_detail", "I_ID", strconv.FormatInt(iid, 10))
	p.raw(" now costs <span class=\"cost\">")
	p.text(money(cents))
	p.raw("</span>.</p>\n")
	if len(related) > 0 {
		p.raw("<p>Related items updated.</p>\n")
	}
	p.foot()
	return nil
}
