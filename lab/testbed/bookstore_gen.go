// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// BookstoreSubjects are the 24 TPC-W subjects, in TPC-W order.
var BookstoreSubjects = []string{
	"ARTS", "BIOGRAPHIES", "BUSINESS", "CHILDREN", "COMPUTERS", "COOKING", "HEALTH", "HISTORY",
	"HOME", "HUMOR", "LITERATURE", "MYSTERY", "NON-FICTION", "PARENTING", "POLITICS", "REFERENCE",
	"RELIGION", "ROMANCE", "SELF-HELP", "SCIENCE-NATURE", "SCIENCE-FICTION", "SPORTS", "YOUTH", "TRAVEL",
}

var titleWords = strings.Fields(`river stone garden silent night winter summer city empire shadow
	light storm glass iron golden forgotten hidden lost secret ancient modern quiet wild broken
	distant burning frozen crimson silver northern southern eastern western island mountain ocean
	desert forest valley harbor bridge tower castle kingdom republic machine engine circuit
	algorithm number theory history journey voyage letters diary memoir portrait study guide
	handbook manual atlas almanac chronicle legend myth song poem story tale dream promise
	debt fortune market trade harvest kitchen bread wine salt sugar coffee tea garden house
	home family mother father daughter son brother sister friend stranger enemy soldier
	doctor teacher painter sailor pilot hunter king queen prince thief spy detective witness
	murder mystery riddle puzzle code cipher signal echo mirror clock compass map lantern`)

var firstNames = strings.Fields(`James Mary John Patricia Robert Jennifer Michael Linda William
	Elizabeth David Barbara Richard Susan Joseph Jessica Thomas Sarah Charles Karen Daniel Nancy
	Matthew Lisa Anthony Betty Mark Margaret Donald Sandra Steven Ashley Paul Kimberly Andrew Emily
	Joshua Donna Kenneth Michelle Kevin Carol Brian Amanda George Dorothy Timothy Melissa Ronald
	Deborah Jason Stephanie Edward Rebecca Jeffrey Sharon Ryan Laura Jacob Cynthia Gary Kathleen`)

var lastNames = strings.Fields(`Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez
	Martinez Hernandez Lopez Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee
	Perez Thompson White Harris Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright
	Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell Carter
	Roberts Gomez Phillips Evans Turner Diaz Parker Cruz Edwards Collins Reyes Stewart Morris
	Morales Murphy Cook Rogers Gutierrez Ortiz Morgan Cooper Peterson Bailey Reed Kelly Howard
	Ramos Kim Cox Ward Richardson Watson Brooks Chavez Wood James Bennett Gray Mendoza Ruiz`)

var countries = strings.Split(`United States,United Kingdom,Canada,Germany,France,Japan,Netherlands,Italy,Switzerland,Australia,Algeria,Argentina,Armenia,Austria,Azerbaijan,Bahamas,Bahrain,Bangladesh,Barbados,Belarus,Belgium,Bermuda,Bolivia,Botswana,Brazil,Bulgaria,Cayman Islands,Chad,Chile,China,Christmas Island,Colombia,Croatia,Cuba,Cyprus,Czech Republic,Denmark,Dominican Republic,Eastern Caribbean,Ecuador,Egypt,El Salvador,Estonia,Ethiopia,Falkland Island,Faroe Island,Fiji,Finland,Gabon,Gibraltar,Greece,Guam,Hong Kong,Hungary,Iceland,India,Indonesia,Iran,Iraq,Ireland,Israel,Jamaica,Jordan,Kazakhstan,Kuwait,Lebanon,Luxembourg,Malaysia,Mexico,Mauritius,New Zealand,Norway,Pakistan,Philippines,Poland,Portugal,Romania,Russia,Saudi Arabia,Singapore,Slovakia,South Africa,South Korea,Spain,Sudan,Sweden,Taiwan,Thailand,Trinidad,Turkey,Venezuela,Zambia`, ",")

var (
	publishers = strings.Fields(`Penguin HarperCollins Macmillan Hachette Scholastic Wiley Pearson
		Springer Elsevier Norton Knopf Vintage Bantam Doubleday Random Houghton Oxford Cambridge`)
	backings  = []string{"HARDBACK", "PAPERBACK", "USED", "AUDIO", "LIMITED-EDITION"}
	shipTypes = []string{"AIR", "UPS", "FEDEX", "SHIP", "COURIER", "MAIL"}
	statuses  = []string{"PROCESSING", "SHIPPED", "PENDING", "DENIED"}
	ccTypes   = []string{"VISA", "MASTERCARD", "DISCOVER", "AMEX", "DINERS"}
	cities    = strings.Fields(`Springfield Riverside Franklin Greenville Bristol Clinton Fairview Salem Madison Georgetown Arlington Ashland`)
	states    = strings.Fields(`AL AK AZ CA CO CT FL GA IL MA MI MN NY OH OR PA TX VA WA WI`)
)

// populationEpoch is the reference "now" of the generated data, so that the
// database depends only on the scale and the seed.
var populationEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

// Population sizes per unit of scale, as in TPC-W (items and customers per
// 1000 items and per 2880 customers; orders 0.9 per customer; authors one
// per four items; two addresses per customer).
const (
	itemsPerScale     = 1000
	customersPerScale = 2880
)

// bookstoreSizes returns the numbers of items, authors, customers, addresses
// and orders at scale.
func bookstoreSizes(scale int) (items, authors, customers, addresses, orders int) {
	items = scale * itemsPerScale
	customers = scale * customersPerScale
	return items, items / 4, customers, 2 * customers, customers * 9 / 10
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// between returns a uniform integer in [lo, hi].
func between(r *rand.Rand, lo, hi int64) int64 { return lo + r.Int64N(hi-lo+1) }

func words(r *rand.Rand, lo, hi int) string {
	n := int(between(r, int64(lo), int64(hi)))
	ws := make([]string, n)
	for i := range ws {
		ws[i] = pick(r, titleWords)
	}
	return strings.Join(ws, " ")
}

func digits(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + r.IntN(10))
	}
	return string(b)
}

func capitalize(w string) string {
	if w == "" {
		return w
	}
	return strings.ToUpper(w[:1]) + w[1:]
}

// makeTitle returns a title of 2 to 4 capitalized words.
func makeTitle(r *rand.Rand) string {
	n := int(between(r, 2, 4))
	ws := make([]string, 0, n+1)
	if r.IntN(3) == 0 {
		ws = append(ws, "The")
	}
	for range n {
		ws = append(ws, capitalize(pick(r, titleWords)))
	}
	return strings.Join(ws, " ")
}

// populate fills an empty database with the generated data at scale, all
// in one transaction on the write pool, then records the params row.
func (s *store) populate(ctx context.Context, scale int, seed uint64) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, ddl := range s.schemaDDL() {
		if _, err := tx.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("creating schema: %w", err)
		}
	}
	r := rand.New(rand.NewPCG(seed, 0x424f4f4b))
	nItems, nAuthors, nCust, nAddr, nOrders := bookstoreSizes(scale)
	day := int64(24 * 3600)

	rows := make([][]any, 0, len(countries))
	for i, c := range countries {
		rows = append(rows, []any{i + 1, c, 0.5 + r.Float64()*2, "currency-" + strconv.Itoa(i+1)})
	}
	if err := s.insertBatch(ctx, tx, "country", []string{"co_id", "co_name", "co_exchange", "co_currency"}, rows); err != nil {
		return err
	}

	rows = make([][]any, 0, nAuthors)
	for i := 1; i <= nAuthors; i++ {
		rows = append(rows, []any{i, pick(r, firstNames), pick(r, lastNames), pick(r, firstNames),
			populationEpoch - between(r, 20*365, 90*365)*day, words(r, 10, 30)})
	}
	if err := s.insertBatch(ctx, tx, "author", []string{"a_id", "a_fname", "a_lname", "a_mname", "a_dob", "a_bio"}, rows); err != nil {
		return err
	}

	cost := make([]int64, nItems+1)
	rows = make([][]any, 0, nItems)
	for i := 1; i <= nItems; i++ {
		pub := populationEpoch - between(r, 0, 20*365)*day
		srp := between(r, 100, 99999)
		cost[i] = srp * between(r, 50, 100) / 100
		rel := relatedIDs(r, i, nItems)
		rows = append(rows, []any{i, makeTitle(r), between(r, 1, int64(nAuthors)), pub, pick(r, publishers),
			pick(r, BookstoreSubjects), words(r, 20, 60), rel[0], rel[1], rel[2], rel[3], rel[4],
			fmt.Sprintf("img/thumb_%d.gif", i), fmt.Sprintf("img/image_%d.gif", i), srp, cost[i],
			pub + between(r, 1, 30)*day, between(r, 10, 30), digits(r, 13), between(r, 20, 9999),
			pick(r, backings), fmt.Sprintf("%d.%d x %d.%d x %d.%d", r.IntN(99)+1, r.IntN(10), r.IntN(99)+1, r.IntN(10), r.IntN(99)+1, r.IntN(10))})
	}
	if err := s.insertBatch(ctx, tx, "item", []string{"i_id", "i_title", "i_a_id", "i_pub_date", "i_publisher",
		"i_subject", "i_desc", "i_related1", "i_related2", "i_related3", "i_related4", "i_related5",
		"i_thumbnail", "i_image", "i_srp", "i_cost", "i_avail", "i_stock", "i_isbn", "i_page",
		"i_backing", "i_dimensions"}, rows); err != nil {
		return err
	}

	rows = make([][]any, 0, nAddr)
	addrCountry := make([]int64, nAddr+1)
	for i := 1; i <= nAddr; i++ {
		addrCountry[i] = between(r, 1, int64(len(countries)))
		rows = append(rows, []any{i, fmt.Sprintf("%d %s St", between(r, 1, 9999), capitalize(pick(r, titleWords))),
			fmt.Sprintf("Apt %d", between(r, 1, 999)), pick(r, cities), pick(r, states), digits(r, 5), addrCountry[i]})
	}
	if err := s.insertBatch(ctx, tx, "address", []string{"addr_id", "addr_street1", "addr_street2", "addr_city",
		"addr_state", "addr_zip", "addr_co_id"}, rows); err != nil {
		return err
	}

	rows = make([][]any, 0, nCust)
	custName := make([]string, nCust+1)
	for i := 1; i <= nCust; i++ {
		fn, ln := pick(r, firstNames), pick(r, lastNames)
		custName[i] = fn + " " + ln
		since := populationEpoch - between(r, 1, 730)*day
		rows = append(rows, []any{i, "u" + strconv.Itoa(i), "p" + strconv.Itoa(i), fn, ln, i,
			digits(r, 10), strings.ToLower(fn+"."+ln) + "@example.com", since,
			since + between(r, 0, populationEpoch-since), populationEpoch, populationEpoch + 2*3600,
			between(r, 0, 50), 0, between(r, 0, 99999), populationEpoch - between(r, 18*365, 80*365)*day,
			words(r, 10, 30)})
	}
	if err := s.insertBatch(ctx, tx, "customer", []string{"c_id", "c_uname", "c_passwd", "c_fname", "c_lname",
		"c_addr_id", "c_phone", "c_email", "c_since", "c_last_login", "c_login", "c_expiration",
		"c_discount", "c_balance", "c_ytd_pmt", "c_birthdate", "c_data"}, rows); err != nil {
		return err
	}

	orders := make([][]any, 0, nOrders)
	lines := make([][]any, 0, nOrders*3)
	xacts := make([][]any, 0, nOrders)
	span := 60 * day
	for o := 1; o <= nOrders; o++ {
		c := between(r, 1, int64(nCust))
		date := populationEpoch - span + int64(o)*span/int64(nOrders+1)
		n := int(between(r, 1, 5))
		var sub, qty int64
		for l := 1; l <= n; l++ {
			item := between(r, 1, int64(nItems))
			q := between(r, 1, 300)
			disc := between(r, 0, 3)
			sub += cost[item] * q * (100 - disc) / 100
			qty += q
			lines = append(lines, []any{l, o, item, q, disc, words(r, 3, 10)})
		}
		tax := sub * 825 / 10000
		total := sub + tax + 300 + 100*qty
		orders = append(orders, []any{o, c, date, sub, tax, total, pick(r, shipTypes), date + between(r, 0, 7)*day,
			c, between(r, 1, int64(nAddr)), pick(r, statuses)})
		xacts = append(xacts, []any{o, pick(r, ccTypes), digits(r, 16), custName[c], date + between(r, 30, 730)*day,
			digits(r, 15), total, date, addrCountry[c]})
	}
	if err := s.insertBatch(ctx, tx, "orders", []string{"o_id", "o_c_id", "o_date", "o_sub_total", "o_tax",
		"o_total", "o_ship_type", "o_ship_date", "o_bill_addr_id", "o_ship_addr_id", "o_status"}, orders); err != nil {
		return err
	}
	if err := s.insertBatch(ctx, tx, "order_line", []string{"ol_id", "ol_o_id", "ol_i_id", "ol_qty",
		"ol_discount", "ol_comments"}, lines); err != nil {
		return err
	}
	if err := s.insertBatch(ctx, tx, "cc_xacts", []string{"cx_o_id", "cx_type", "cx_num", "cx_name",
		"cx_expire", "cx_auth_id", "cx_xact_amt", "cx_xact_date", "cx_co_id"}, xacts); err != nil {
		return err
	}

	for _, ddl := range indexDDL() {
		if _, err := tx.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("creating index: %w", err)
		}
	}
	if s.dialect == dialectPostgres {
		for _, t := range [][2]string{{"address", "addr_id"}, {"customer", "c_id"}, {"orders", "o_id"}} {
			q := fmt.Sprintf("SELECT setval(pg_get_serial_sequence('%s', '%s'), (SELECT MAX(%s) FROM %s))", t[0], t[1], t[1], t[0])
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("setting sequence of %s: %w", t[0], err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO sluice_meta (k, v) VALUES (?, ?)`),
		paramsKey, bookstoreParams(scale, seed)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if _, err := s.write.ExecContext(ctx, "ANALYZE"); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

// relatedIDs returns five distinct item ids in 1..n other than i (fewer
// distinct ones only when n < 7).
func relatedIDs(r *rand.Rand, i, n int) [5]int64 {
	var rel [5]int64
	for k := range rel {
		for {
			v := between(r, 1, int64(n))
			ok := v != int64(i) || n == 1
			for _, p := range rel[:k] {
				if p == v && n >= 7 {
					ok = false
				}
			}
			if ok {
				rel[k] = v
				break
			}
		}
	}
	return rel
}

// ensure makes the database ready: it reuses a complete database generated
// for the same scale and seed unless fresh is set, and (re)generates it
// otherwise. It reports whether the data were generated.
func (s *store) ensure(ctx context.Context, scale int, seed uint64, fresh bool) (bool, error) {
	if !fresh && s.storedParams(ctx) == bookstoreParams(scale, seed) {
		return false, nil
	}
	if s.dialect == dialectPostgres {
		if err := s.dropAll(ctx); err != nil {
			return false, err
		}
	}
	if err := s.populate(ctx, scale, seed); err != nil {
		return false, fmt.Errorf("generating bookstore at scale %d: %w", scale, err)
	}
	return true, nil
}
