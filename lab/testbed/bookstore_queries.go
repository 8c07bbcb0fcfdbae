// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// bookstoreQueries holds the prepared statements of the bookstore, written
// with ? placeholders and rebound per dialect. Read statements run on the
// read pool, write statements (and reads inside write transactions) on the
// write pool.
type bookstoreQueries struct {
	all []*sql.Stmt

	// read pool
	customerName, itemRelated, itemsByID5, maxOrder, bestSellers, bestSellersAll,
	newProducts, product, searchAuthor, searchTitle, searchSubject, cartExists, cartLines,
	customerByUname, address, lastOrder, orderLines, ccXact, relatedCompute, itemBrief *sql.Stmt

	// write pool
	newCart, cartExistsW, touchCart, itemExistsW, addLine, setLine, delLine, countLines,
	login, newAddress, newCustomer, setUname, customerForBuy, cartLinesW,
	newOrder, newOrderLine, updateStock, newXact, clearCart, updateItem, updateRelated *sql.Stmt
}

// itemList is the select list of item listings: id, title, author name.
const itemList = `SELECT i_id, i_title, a_fname, a_lname FROM item JOIN author ON a_id = i_a_id `

// bestSellersSQL aggregates the quantities sold of the order lines of recent
// orders (ol_o_id > ?), best first.
const bestSellersSQL = `SELECT i_id, i_title, a_fname, a_lname, SUM(ol_qty) AS qty
	FROM order_line JOIN item ON i_id = ol_i_id JOIN author ON a_id = i_a_id
	WHERE ol_o_id > ? %s
	GROUP BY i_id, i_title, a_fname, a_lname
	ORDER BY qty DESC, i_id LIMIT %d`

func (q *bookstoreQueries) prepare(ctx context.Context, s *store) error {
	var err error
	p := func(db *sql.DB, query string) *sql.Stmt {
		if err != nil {
			return nil
		}
		st, e := db.PrepareContext(ctx, s.rebind(query))
		if e != nil {
			err = fmt.Errorf("bookstore: preparing %q: %w", strings.Join(strings.Fields(query), " "), e)
			return nil
		}
		q.all = append(q.all, st)
		return st
	}
	r, w := s.read, s.write

	q.customerName = p(r, `SELECT c_fname, c_lname FROM customer WHERE c_id = ?`)
	q.itemRelated = p(r, `SELECT i_related1, i_related2, i_related3, i_related4, i_related5 FROM item WHERE i_id = ?`)
	q.itemsByID5 = p(r, `SELECT i_id, i_title, i_thumbnail, i_cost FROM item WHERE i_id IN (?, ?, ?, ?, ?) ORDER BY i_id`)
	q.maxOrder = p(r, `SELECT COALESCE(MAX(o_id), 0) FROM orders`)
	q.bestSellers = p(r, fmt.Sprintf(bestSellersSQL, "AND i_subject = ?", 50))
	// Over all subjects, aggregating first and joining the top five only
	// is several times cheaper than the joined form.
	q.bestSellersAll = p(r, `SELECT i_id, i_title, a_fname, a_lname, t.qty
		FROM (SELECT ol_i_id, SUM(ol_qty) AS qty FROM order_line WHERE ol_o_id > ?
			GROUP BY ol_i_id ORDER BY qty DESC, ol_i_id LIMIT 5) t
		JOIN item ON i_id = t.ol_i_id JOIN author ON a_id = i_a_id
		ORDER BY t.qty DESC, i_id`)
	q.newProducts = p(r, itemList+`WHERE i_subject = ? ORDER BY i_pub_date DESC, i_title, i_id LIMIT 50`)
	q.product = p(r, `SELECT i_title, a_fname, a_lname, i_pub_date, i_publisher, i_subject, i_desc,
		i_thumbnail, i_image, i_srp, i_cost, i_avail, i_stock, i_isbn, i_page, i_backing, i_dimensions,
		i_related1, i_related2, i_related3, i_related4, i_related5
		FROM item JOIN author ON a_id = i_a_id WHERE i_id = ?`)
	q.searchAuthor = p(r, itemList+`WHERE LOWER(a_lname) LIKE ? ESCAPE '\' ORDER BY i_title, i_id LIMIT 50`)
	q.searchTitle = p(r, itemList+`WHERE LOWER(i_title) LIKE ? ESCAPE '\' ORDER BY i_title, i_id LIMIT 50`)
	q.searchSubject = p(r, itemList+`WHERE i_subject = ? ORDER BY i_title, i_id LIMIT 50`)
	q.cartExists = p(r, `SELECT sc_id FROM shopping_cart WHERE sc_id = ?`)
	q.cartLines = p(r, `SELECT scl_i_id, scl_qty, i_title, i_cost, i_srp, i_backing
		FROM shopping_cart_line JOIN item ON i_id = scl_i_id WHERE scl_sc_id = ? ORDER BY scl_i_id`)
	q.customerByUname = p(r, `SELECT c_id, c_passwd, c_fname, c_lname, c_discount, c_addr_id, c_email, c_phone
		FROM customer WHERE c_uname = ?`)
	q.address = p(r, `SELECT addr_street1, addr_street2, addr_city, addr_state, addr_zip, co_name
		FROM address JOIN country ON co_id = addr_co_id WHERE addr_id = ?`)
	q.lastOrder = p(r, `SELECT o_id, o_date, o_sub_total, o_tax, o_total, o_ship_type, o_ship_date, o_status,
		o_bill_addr_id, o_ship_addr_id FROM orders WHERE o_c_id = ? ORDER BY o_id DESC LIMIT 1`)
	q.orderLines = p(r, `SELECT ol_i_id, i_title, i_publisher, i_cost, ol_qty, ol_discount, ol_comments
		FROM order_line JOIN item ON i_id = ol_i_id WHERE ol_o_id = ? ORDER BY ol_id`)
	q.ccXact = p(r, `SELECT cx_type, cx_auth_id, cx_xact_amt FROM cc_xacts WHERE cx_o_id = ?`)
	q.relatedCompute = p(r, `SELECT ol_i_id, SUM(ol_qty) AS qty FROM order_line
		WHERE ol_o_id IN (SELECT ol_o_id FROM order_line WHERE ol_i_id = ? AND ol_o_id > ?) AND ol_i_id <> ?
		GROUP BY ol_i_id ORDER BY qty DESC, ol_i_id LIMIT 5`)
	q.itemBrief = p(r, `SELECT i_title, i_cost, i_srp, i_thumbnail, i_stock, i_pub_date FROM item WHERE i_id = ?`)

	q.newCart = p(w, `INSERT INTO shopping_cart (sc_time) VALUES (?) RETURNING sc_id`)
	q.cartExistsW = p(w, `SELECT sc_id FROM shopping_cart WHERE sc_id = ?`)
	q.touchCart = p(w, `UPDATE shopping_cart SET sc_time = ? WHERE sc_id = ?`)
	q.itemExistsW = p(w, `SELECT i_id FROM item WHERE i_id = ?`)
	q.addLine = p(w, `INSERT INTO shopping_cart_line (scl_sc_id, scl_i_id, scl_qty) VALUES (?, ?, ?)
		ON CONFLICT (scl_sc_id, scl_i_id) DO UPDATE SET scl_qty = shopping_cart_line.scl_qty + excluded.scl_qty`)
	q.setLine = p(w, `INSERT INTO shopping_cart_line (scl_sc_id, scl_i_id, scl_qty) VALUES (?, ?, ?)
		ON CONFLICT (scl_sc_id, scl_i_id) DO UPDATE SET scl_qty = excluded.scl_qty`)
	q.delLine = p(w, `DELETE FROM shopping_cart_line WHERE scl_sc_id = ? AND scl_i_id = ?`)
	q.countLines = p(w, `SELECT COUNT(*) FROM shopping_cart_line WHERE scl_sc_id = ?`)
	q.login = p(w, `UPDATE customer SET c_login = ?, c_expiration = ? WHERE c_id = ?`)
	q.newAddress = p(w, `INSERT INTO address (addr_street1, addr_street2, addr_city, addr_state, addr_zip, addr_co_id)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING addr_id`)
	q.newCustomer = p(w, `INSERT INTO customer (c_fname, c_lname, c_addr_id, c_phone, c_email, c_since,
		c_last_login, c_login, c_expiration, c_discount, c_balance, c_ytd_pmt, c_birthdate, c_data)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING c_id`)
	q.setUname = p(w, `UPDATE customer SET c_uname = ?, c_passwd = ? WHERE c_id = ?`)
	q.customerForBuy = p(w, `SELECT c_uname, c_passwd, c_fname, c_lname, c_discount, c_addr_id, addr_co_id
		FROM customer JOIN address ON addr_id = c_addr_id WHERE c_id = ?`)
	q.cartLinesW = p(w, `SELECT scl_i_id, scl_qty, i_cost FROM shopping_cart_line JOIN item ON i_id = scl_i_id
		WHERE scl_sc_id = ? ORDER BY scl_i_id`)
	q.newOrder = p(w, `INSERT INTO orders (o_c_id, o_date, o_sub_total, o_tax, o_total, o_ship_type, o_ship_date,
		o_bill_addr_id, o_ship_addr_id, o_status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING o_id`)
	q.newOrderLine = p(w, `INSERT INTO order_line (ol_id, ol_o_id, ol_i_id, ol_qty, ol_discount, ol_comments)
		VALUES (?, ?, ?, ?, ?, ?)`)
	q.updateStock = p(w, `UPDATE item SET i_stock = CASE WHEN i_stock - ? >= 10 THEN i_stock - ? ELSE i_stock - ? + 21 END
		WHERE i_id = ?`)
	q.newXact = p(w, `INSERT INTO cc_xacts (cx_o_id, cx_type, cx_num, cx_name, cx_expire, cx_auth_id, cx_xact_amt,
		cx_xact_date, cx_co_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	q.clearCart = p(w, `DELETE FROM shopping_cart_line WHERE scl_sc_id = ?`)
	q.updateItem = p(w, `UPDATE item SET i_cost = ?, i_pub_date = ? WHERE i_id = ?`)
	q.updateRelated = p(w, `UPDATE item SET i_related1 = ?, i_related2 = ?, i_related3 = ?, i_related4 = ?,
		i_related5 = ? WHERE i_id = ?`)
	return err
}

func (q *bookstoreQueries) close() error {
	var errs []error
	for _, st := range q.all {
		errs = append(errs, st.Close())
	}
	q.all = nil
	return errors.Join(errs...)
}
