// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// LowQuality is the quality below which the bookstore skips the expensive
// optional parts of its pages: promotional items, the best-seller sidebar
// of the home page, the related items of product detail, and the
// recomputation of related items in admin confirm. At quality ≥ LowQuality
// pages are complete.
const LowQuality = 0.5

// bestSellerWindow is the number of most recent orders the best-seller
// queries aggregate over (3333 in TPC-W).
const bestSellerWindow = 3333

// relatedWindow is the number of most recent orders admin confirm scans to
// find items bought together (10000 in TPC-W).
const relatedWindow = 10000

// BookstoreConfig configures a Bookstore. Start from DefaultBookstoreConfig.
type BookstoreConfig struct {
	// DB selects the database: empty for SQLite, or a PostgreSQL URL
	// "postgres://user:pass@host:port/db?sslmode=disable".
	DB string `json:"db"`
	// Data is the directory of the SQLite file
	// bookstore-scale<Scale>-seed<Seed>.db. Empty means a temporary
	// directory removed by Close. Ignored for PostgreSQL.
	Data string `json:"data"`
	// Scale sets the population: Scale×1000 items, Scale×2880 customers,
	// 0.9 orders per customer with 1–5 lines each, one author per four
	// items, two addresses per customer (TPC-W's ratios). 1..1000.
	Scale int `json:"scale"`
	// Seed determines the generated data; a database generated for the
	// same Scale and Seed is reused.
	Seed uint64 `json:"seed"`
	// Fresh regenerates the data even when a matching database exists.
	Fresh bool `json:"fresh"`
	// Pool is the number of database connections: SQLite readers (plus one
	// writer) or the PostgreSQL pool. 1..1024.
	Pool int `json:"pool"`
	// Schema is the PostgreSQL schema that holds the tables; the bookstore
	// drops and recreates its tables there when it regenerates. A lower-case
	// identifier.
	Schema string `json:"schema"`
}

// DefaultBookstoreConfig returns SQLite in a temporary directory, scale 1,
// seed 1, a pool of max(4, 2×GOMAXPROCS) connections and schema
// "sluice_bookstore".
func DefaultBookstoreConfig() BookstoreConfig {
	return BookstoreConfig{Scale: 1, Seed: 1, Pool: max(4, 2*runtime.GOMAXPROCS(0)), Schema: "sluice_bookstore"}
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// isPostgresDSN reports whether dsn selects PostgreSQL.
func isPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Validate reports the first invalid field, naming it and its value.
func (c BookstoreConfig) Validate() error {
	switch {
	case c.DB != "" && !isPostgresDSN(c.DB):
		return fmt.Errorf("bookstore: db=%q: want empty (SQLite) or a postgres:// URL", c.DB)
	case c.Scale < 1 || c.Scale > 1000:
		return fmt.Errorf("bookstore: scale=%d: want 1..1000", c.Scale)
	case c.Pool < 1 || c.Pool > 1024:
		return fmt.Errorf("bookstore: pool=%d: want 1..1024", c.Pool)
	case !schemaName.MatchString(c.Schema):
		return fmt.Errorf("bookstore: schema=%q: want a lower-case SQL identifier", c.Schema)
	}
	if c.DB != "" {
		if _, err := url.Parse(c.DB); err != nil {
			return fmt.Errorf("bookstore: db: %v", err)
		}
	}
	return nil
}

// Bookstore is a TPC-W-like online bookstore: the 14 web interactions as
// HTML pages over real SQL (see TESTBED-CONTRACT.md for the URLs). Pages
// link to each other with the contract's parameter names; links carry the
// visitor's SHOPPING_ID and C_ID. Unknown ids are answered 404, malformed
// parameters 400 naming the parameter, a wrong password 403 and buying an
// empty cart 409.
//
// The costs follow TPC-W: best sellers aggregate order lines of the 3333
// most recent orders, searches run LIKE over titles or author names, buy
// confirm is a transaction that writes an order, its lines and a card
// transaction and updates stock. At quality below LowQuality the optional
// parts are skipped (see LowQuality). X-Sluice-Utilization is the same
// in-flight estimate as CGI's.
//
// Bookstore is safe for concurrent use.
type Bookstore struct {
	cfg       BookstoreConfig
	db        *store
	q         bookstoreQueries
	items     int
	customers int
	tempDir   string
	generated bool
	seq       atomic.Uint64
	meter     *loadMeter
	ctr       counters
	routes    map[string]bookstorePage
	closed    atomic.Bool
}

var _ Backend = (*Bookstore)(nil)

// NewBookstore validates cfg, opens the database, generates the data if no
// matching database exists, and returns a Bookstore. Generation at scale 1
// takes about a second. Call Close when done.
func NewBookstore(ctx context.Context, cfg BookstoreConfig) (*Bookstore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Bookstore{cfg: cfg, meter: newLoadMeter(runtime.GOMAXPROCS(0))}
	b.items, _, b.customers, _, _ = bookstoreSizes(cfg.Scale)
	var err error
	if cfg.DB == "" {
		err = b.openSQLite(ctx)
	} else {
		b.db, err = openPostgres(ctx, cfg.DB, cfg.Schema, cfg.Pool)
		if err == nil {
			b.generated, err = b.db.ensure(ctx, cfg.Scale, cfg.Seed, cfg.Fresh)
		}
	}
	if err == nil {
		err = b.q.prepare(ctx, b.db)
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	b.routes = b.pages()
	return b, nil
}

func (b *Bookstore) openSQLite(ctx context.Context) error {
	dir := b.cfg.Data
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "sluice-bookstore-*"); err != nil {
			return fmt.Errorf("bookstore: temporary directory: %w", err)
		}
		b.tempDir = dir
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bookstore: data=%q: %w", dir, err)
	}
	path := filepath.Join(dir, fmt.Sprintf("bookstore-scale%d-seed%d.db", b.cfg.Scale, b.cfg.Seed))
	st, err := openSQLite(path, b.cfg.Pool)
	if err != nil {
		return err
	}
	if !b.cfg.Fresh && st.storedParams(ctx) == bookstoreParams(b.cfg.Scale, b.cfg.Seed) {
		b.db = st
		return nil
	}
	// Missing, incomplete, stale or unwanted: start from an empty file.
	st.close()
	if err := removeSQLiteFiles(path); err != nil {
		return fmt.Errorf("bookstore: removing old database: %w", err)
	}
	if b.db, err = openSQLite(path, b.cfg.Pool); err != nil {
		return err
	}
	if err := b.db.populate(ctx, b.cfg.Scale, b.cfg.Seed); err != nil {
		return fmt.Errorf("bookstore: generating %q at scale %d: %w", path, b.cfg.Scale, err)
	}
	b.generated = true
	return nil
}

// Generated reports whether NewBookstore generated the data (false when it
// reused an existing database).
func (b *Bookstore) Generated() bool { return b.generated }

// Items returns the number of items (ids 1..Items).
func (b *Bookstore) Items() int { return b.items }

// Customers returns the number of generated customers (ids 1..Customers;
// customers registered later get higher ids).
func (b *Bookstore) Customers() int { return b.customers }

// DB returns the read pool, for inspection by tests and tools.
func (b *Bookstore) DB() *sql.DB { return b.db.read }

// Dialect returns "sqlite" or "postgres".
func (b *Bookstore) Dialect() string { return b.db.dialect }

// BookstoreMeta is the /_meta manifest of a Bookstore.
type BookstoreMeta struct {
	Kind       string   `json:"kind"`
	Items      int      `json:"items"`
	Customers  int      `json:"customers"`
	Subjects   []string `json:"subjects"`
	DB         string   `json:"db"`
	Scale      int      `json:"scale"`
	Seed       uint64   `json:"seed"`
	LowQuality float64  `json:"low_quality"`
}

// Meta returns the manifest.
func (b *Bookstore) Meta() any {
	return BookstoreMeta{Kind: "bookstore", Items: b.items, Customers: b.customers, Subjects: BookstoreSubjects,
		DB: b.db.dialect, Scale: b.cfg.Scale, Seed: b.cfg.Seed, LowQuality: LowQuality}
}

// Stats returns the request counters.
func (b *Bookstore) Stats() Stats { return b.ctr.stats() }

// Close closes the database and removes a temporary directory. It is
// idempotent.
func (b *Bookstore) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	var errs []error
	errs = append(errs, b.q.close())
	if b.db != nil {
		errs = append(errs, b.db.close())
	}
	if b.tempDir != "" {
		errs = append(errs, os.RemoveAll(b.tempDir))
	}
	return errors.Join(errs...)
}

// httpError is an error with the status it is answered with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badParam(name, value, why string) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf("parameter %s=%q: %s", name, value, why)}
}

func notFound(format string, args ...any) error {
	return &httpError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

// session is the visitor state that links carry: cart and customer ids as
// validated decimal strings, or empty.
type session struct {
	shoppingID string
	cID        string
}

// bookstorePage renders one interaction into p.
type bookstorePage func(ctx context.Context, req *bsRequest) error

// bsRequest is one request being rendered.
type bsRequest struct {
	r    *http.Request
	q    url.Values
	full bool // quality ≥ LowQuality
	rng  *rand.Rand
	p    *page
}

// str returns the trimmed parameter name.
func (req *bsRequest) str(name string) string { return strings.TrimSpace(req.q.Get(name)) }

// id returns a positive integer parameter. With required false, an absent
// parameter gives 0 and no error.
func (req *bsRequest) id(name string, required bool) (int64, error) {
	v := req.str(name)
	if v == "" {
		if required {
			return 0, badParam(name, v, "required")
		}
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, badParam(name, v, "want a positive integer")
	}
	return n, nil
}

// ServeHTTP answers /_meta, /healthz and the 14 interactions.
func (b *Bookstore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if serveMeta(w, r, b.Meta) {
		return
	}
	b.meter.metered(&b.ctr, func() int { return b.serve(w, r) })
}

func (b *Bookstore) serve(w http.ResponseWriter, r *http.Request) int {
	h := w.Header()
	code, body := b.render(r)
	h.Set(UtilizationHeader, formatUtilization(b.meter.utilization(time.Now())))
	if code == http.StatusOK {
		h.Set("Content-Type", "text/html; charset=utf-8")
	} else {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("X-Content-Type-Options", "nosniff")
		if code == http.StatusServiceUnavailable {
			h.Set("Retry-After", "1")
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		w.Write([]byte(body))
	}
	return code
}

// render runs the page for r and returns the status and body.
func (b *Bookstore) render(r *http.Request) (int, string) {
	if b.closed.Load() {
		return http.StatusServiceUnavailable, "bookstore closed\n"
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return http.StatusMethodNotAllowed, "method " + r.Method + " not allowed; use GET\n"
	}
	path := r.URL.Path
	if path == "/" {
		path = "/home"
	}
	pg, ok := b.routes[path]
	if !ok {
		return http.StatusNotFound, "no such page " + r.URL.Path + "\n"
	}
	quality, err := ParseQuality(r.Header)
	if err != nil {
		return http.StatusBadRequest, err.Error() + "\n"
	}
	q := r.URL.Query()
	req := &bsRequest{
		r: r, q: q, full: quality >= LowQuality,
		rng: rand.New(rand.NewPCG(b.cfg.Seed, b.seq.Add(1))),
	}
	var sess session
	for _, name := range []string{"SHOPPING_ID", "C_ID"} {
		if _, err := req.id(name, false); err != nil {
			return http.StatusBadRequest, err.Error() + "\n"
		}
	}
	sess.shoppingID, sess.cID = req.str("SHOPPING_ID"), req.str("C_ID")
	req.p = newPage(sess)
	if err := pg(r.Context(), req); err != nil {
		var he *httpError
		if errors.As(err, &he) {
			return he.code, he.msg + "\n"
		}
		if r.Context().Err() != nil {
			return http.StatusServiceUnavailable, "request canceled\n"
		}
		slog.Error("bookstore page failed", "path", path, "query", r.URL.RawQuery, "err", err)
		return http.StatusInternalServerError, "internal error: " + err.Error() + "\n"
	}
	return http.StatusOK, req.p.String()
}

// page builds an HTML page. Hrefs use a raw "&" between parameters (which
// HTML parsers accept in attribute values) so that naive link extractors
// and real HTML parsers read the same URL.
type page struct {
	b    strings.Builder
	sess session
}

func newPage(s session) *page {
	p := &page{sess: s}
	p.b.Grow(8 << 10)
	return p
}

func (p *page) String() string { return p.b.String() }

// raw writes s unescaped.
func (p *page) raw(s string) { p.b.WriteString(s) }

// text writes s HTML-escaped.
func (p *page) text(s string) { p.b.WriteString(html.EscapeString(s)) }

// textf writes a formatted, escaped string.
func (p *page) textf(format string, args ...any) { p.text(fmt.Sprintf(format, args...)) }

// href returns the URL of an interaction with the given key/value pairs,
// followed by the session's SHOPPING_ID and C_ID unless given.
func (p *page) href(path string, kv ...string) string {
	var b strings.Builder
	b.WriteString(path)
	sep := byte('?')
	add := func(k, v string) {
		b.WriteByte(sep)
		sep = '&'
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(v))
	}
	has := map[string]bool{}
	for i := 0; i+1 < len(kv); i += 2 {
		add(kv[i], kv[i+1])
		has[kv[i]] = true
	}
	if p.sess.shoppingID != "" && !has["SHOPPING_ID"] {
		add("SHOPPING_ID", p.sess.shoppingID)
	}
	if p.sess.cID != "" && !has["C_ID"] {
		add("C_ID", p.sess.cID)
	}
	return b.String()
}

// link writes <a href="...">label</a>.
func (p *page) link(label, path string, kv ...string) {
	p.raw(`<a href="`)
	p.raw(p.href(path, kv...)) // keys are constants, values are query-escaped
	p.raw(`">`)
	p.text(label)
	p.raw("</a>")
}

// head writes the document start, the title and the navigation bar.
func (p *page) head(title string) {
	p.raw("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>TPC-W ")
	p.text(title)
	p.raw("</title></head>\n<body>\n<h1>")
	p.text(title)
	p.raw("</h1>\n<p class=\"nav\">")
	p.link("Home", "/home")
	p.raw(" | ")
	p.link("Search", "/search_request")
	p.raw(" | ")
	p.link("Shopping cart", "/shopping_cart")
	p.raw(" | ")
	p.link("Order status", "/order_inquiry")
	p.raw("</p>\n")
}

// foot closes the document.
func (p *page) foot() { p.raw("<hr><p>sluice-lab testbed bookstore</p>\n</body></html>\n") }

// money formats cents as dollars.
func money(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s$%d.%02d", sign, cents/100, cents%100)
}

// day formats a Unix time as a date.
func day(unix int64) string { return time.Unix(unix, 0).UTC().Format("2006-01-02") }
