package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ferry-cdc/ferry/replicator"
)

// revenueRow is one group of the analytical query, in a form both sides
// produce identically.
type revenueRow struct {
	country, month string
	orders         int64
	revenue        string // the exact decimal sum
}

// pgRevenueSQL is the analytical question on PostgreSQL: revenue and
// orders by customer country and month since $1.
const pgRevenueSQL = `SELECT c.country, date_trunc('month', o.created_at AT TIME ZONE 'UTC')::date AS month,
       count(*) AS orders, sum(o.total)::text AS revenue
FROM orders o JOIN customers c ON c.id = o.customer_id
WHERE o.created_at >= $1
GROUP BY 1, 2 ORDER BY 1, 2`

// chRevenueSQL is the same question on ClickHouse, over the live rows.
// created_at is DateTime64(6, 'UTC') on servers that have it, else Int64
// microseconds since the epoch.
func (d *demo) chRevenueSQL(since time.Time) string {
	month := "toStartOfMonth(toDateTime(intDiv(created_at, 1000000)), 'UTC')"
	cutoff := strconv.FormatInt(since.UnixMicro(), 10)
	if d.sink.Capabilities().DateTime64 {
		month = "toStartOfMonth(created_at)"
		cutoff = "toDateTime64('" + since.UTC().Format("2006-01-02 15:04:05") + "', 6, 'UTC')"
	}
	return `SELECT country, ` + month + ` AS month, count() AS orders, toString(sum(total)) AS revenue
FROM (SELECT assumeNotNull(customer_id) AS customer_id, created_at, total
      FROM ` + d.cfg.dbName() + `.orders FINAL
      WHERE _ferry_deleted = 0 AND isNotNull(customer_id) AND created_at >= ` + cutoff + `) AS o
ALL INNER JOIN (SELECT id AS customer_id, country FROM ` + d.cfg.dbName() + `.customers FINAL WHERE _ferry_deleted = 0) AS c
USING customer_id
GROUP BY country, month ORDER BY country, month`
}

func (d *demo) pgRevenue(ctx context.Context, since time.Time) ([]revenueRow, error) {
	rows, err := d.pg.Query(ctx, pgRevenueSQL, since)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL: revenue query: %w", err)
	}
	var out []revenueRow
	var country, revenue *string
	var month *time.Time
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&country, &month, &n, &revenue}, func() error {
		out = append(out, newRevenueRow(country, month, n, revenue))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL: revenue query: %w", err)
	}
	return out, nil
}

func (d *demo) chRevenue(ctx context.Context, since time.Time) ([]revenueRow, error) {
	rows, err := d.ch.Query(ctx, d.chRevenueSQL(since))
	if err != nil {
		return nil, fmt.Errorf("ClickHouse: revenue query: %w", err)
	}
	defer rows.Close()
	var out []revenueRow
	for rows.Next() {
		var country, revenue *string
		var month *time.Time
		var n uint64
		if err := rows.Scan(&country, &month, &n, &revenue); err != nil {
			return nil, fmt.Errorf("ClickHouse: revenue query: %w", err)
		}
		out = append(out, newRevenueRow(country, month, int64(n), revenue))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ClickHouse: revenue query: %w", err)
	}
	return out, nil
}

func newRevenueRow(country *string, month *time.Time, n int64, revenue *string) revenueRow {
	r := revenueRow{country: "NULL", month: "NULL", orders: n, revenue: "NULL"}
	if country != nil {
		r.country = *country
	}
	if month != nil {
		r.month = month.Format("2006-01")
	}
	if revenue != nil {
		r.revenue = plainDecimal(*revenue)
	}
	return r
}

// plainDecimal drops a decimal's trailing fractional zeros: PostgreSQL's
// numeric text keeps the scale (4260.00) and ClickHouse 26.7's toString
// does not (4260); both then read the same for the same value.
func plainDecimal(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// best runs the query three times and returns its rows and fastest time.
func best(ctx context.Context, since time.Time, q func(context.Context, time.Time) ([]revenueRow, error)) ([]revenueRow, time.Duration, error) {
	var rows []revenueRow
	fastest := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		r, err := q(ctx, since)
		if err != nil {
			return nil, 0, err
		}
		rows, fastest = r, min(fastest, time.Since(start))
	}
	return rows, fastest, nil
}

// report prints both sides' row counts, the analytical query on both, the
// final lag and where to look next.
func (d *demo) report(ctx context.Context) error {
	d.say("\nRows (ClickHouse: live rows, FINAL WHERE _ferry_deleted = 0):")
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  %-10s\tPostgreSQL\tClickHouse\t\n", "table")
	for _, table := range []string{"customers", "orders"} {
		pg, chRows, err := d.counts(ctx, table)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "  %-10s\t%s\t%s\t  %s\n", table, thousands(pg), thousands(chRows), sameText(pg == chRows))
	}
	tw.Flush()
	if err := d.compare(ctx); err != nil {
		return err
	}
	d.say("\nSlot lag right after the final catch-up: %s", d.finalLag)
	d.say("(PostgreSQL's WAL position minus what ferry confirmed; WAL of the server's other databases counts too.)")
	d.hints()
	return nil
}

// compare runs the analytical query on both sides and prints them side by side.
func (d *demo) compare(ctx context.Context) error {
	now := time.Now().UTC()
	since := time.Date(now.Year(), now.Month()-11, 1, 0, 0, 0, 0, time.UTC)
	pgRows, pgTime, err := best(ctx, since, d.pgRevenue)
	if err != nil {
		return err
	}
	chRows, chTime, err := best(ctx, since, d.chRevenue)
	if err != nil {
		return err
	}
	d.say("\nRevenue and orders by customer country and month since %s (%d groups; best of 3 runs):", since.Format("2006-01-02"), len(pgRows))
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  %-7s\t%-7s\tPostgreSQL orders\trevenue\tClickHouse orders\trevenue\t\n", "country", "month")
	for i := range min(8, max(len(pgRows), len(chRows))) {
		r := at(pgRows, chRows, i)
		fmt.Fprintf(tw, "  %-7s\t%-7s\t%s\t%s\t\n", r.country, r.month, cells(pgRows, i), cells(chRows, i))
	}
	fmt.Fprintf(tw, "  %-7s\t%-7s\t\t%s\t\t%s\t\n", "query", "time", pgTime.Round(time.Millisecond), chTime.Round(time.Millisecond))
	tw.Flush()
	if diff := firstDifference(pgRows, chRows); diff != "" {
		d.say("Full results identical: NO (%s)", diff)
	} else {
		d.say("Full results identical: yes (%d rows)", len(pgRows))
	}
	return nil
}

func at(a, b []revenueRow, i int) revenueRow {
	if i < len(a) {
		return a[i]
	}
	return b[i]
}

func cells(rows []revenueRow, i int) string {
	if i >= len(rows) {
		return "-\t-"
	}
	return thousands(rows[i].orders) + "\t" + groupDecimal(rows[i].revenue)
}

func firstDifference(pg, chRows []revenueRow) string {
	for i := range min(len(pg), len(chRows)) {
		if pg[i] != chRows[i] {
			return fmt.Sprintf("row %d: PostgreSQL %v, ClickHouse %v", i+1, pg[i], chRows[i])
		}
	}
	if len(pg) != len(chRows) {
		return fmt.Sprintf("%d rows in PostgreSQL, %d in ClickHouse", len(pg), len(chRows))
	}
	return ""
}

// counts returns a table's rows in PostgreSQL and live rows in ClickHouse.
func (d *demo) counts(ctx context.Context, table string) (pg, chRows int64, err error) {
	var n uint64 // ClickHouse first: counted while writes go on, it is then never ahead
	q := "SELECT count() FROM " + d.cfg.dbName() + "." + table + " FINAL WHERE _ferry_deleted = 0"
	if err := d.ch.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, 0, fmt.Errorf("ClickHouse: count %s: %w", table, err)
	}
	if err := d.pg.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&pg); err != nil {
		return 0, 0, fmt.Errorf("PostgreSQL: count %s: %w", table, err)
	}
	return pg, int64(n), nil
}

// lag is how far the slot's confirmed position is behind PostgreSQL's WAL.
func (d *demo) lag(ctx context.Context) (string, error) {
	var b *int64
	err := d.pg.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, d.cfg.dbName()).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && b == nil) {
		return "-", nil
	}
	if err != nil {
		return "", fmt.Errorf("PostgreSQL: read the slot's lag: %w", err)
	}
	return byteSize(*b), nil
}

// hints tells where to look next, without any password.
func (d *demo) hints() {
	bin := "ferry"
	if filepath.Base(os.Args[0]) == "ferry" {
		bin = os.Args[0]
	}
	pgURL, chURL := shellQuote(replicator.Redact(d.dbURL)), shellQuote(replicator.Redact(d.cfg.CH))
	d.say("\nLook around:")
	d.say("  %s", clickhouseClient(d.cfg.CH, d.cfg.dbName()))
	d.say("      SELECT status, count() FROM orders FINAL WHERE _ferry_deleted = 0 GROUP BY status")
	d.say("  psql %s", pgURL)
	d.say("Compare every row of both sides:")
	d.say("  %s verify --pg %s --ch %s --ch-database %s --slot %s --publication %s", bin, pgURL, chURL, d.cfg.dbName(), d.cfg.dbName(), d.cfg.dbName())
	d.say("Keep replicating (the slot %s stays; the next `ferry demo` drops it):", d.cfg.dbName())
	d.say("  %s run --pg %s --ch %s --ch-database %s --slot %s --publication %s", bin, pgURL, chURL, d.cfg.dbName(), d.cfg.dbName(), d.cfg.dbName())
	d.say("Stop the local stack:\n  make stack-down")
}

// clickhouseClient is the clickhouse-client command for the demo database db.
func clickhouseClient(dsn, db string) string {
	cmd := "clickhouse-client"
	u, err := url.Parse(dsn)
	if err != nil {
		return cmd + " -d " + db
	}
	if h := u.Hostname(); h != "" && h != "localhost" && h != "127.0.0.1" {
		cmd += " --host " + h
	}
	if p := u.Port(); p != "" && p != "9000" {
		cmd += " --port " + p
	}
	if name := u.User.Username(); name != "" && name != "default" {
		cmd += " --user " + shellQuote(name)
	}
	if _, has := u.User.Password(); has {
		cmd += " --password '<password>'"
	}
	return cmd + " -d " + db
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func sameText(same bool) string {
	if same {
		return "same"
	}
	return "DIFFERENT"
}

// thousands formats n with thousands separators: 1234567 → 1,234,567.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	return groupDecimal(s)
}

// groupDecimal puts thousands separators into a decimal's integer part.
func groupDecimal(s string) string {
	sign, rest := "", s
	if strings.HasPrefix(rest, "-") {
		sign, rest = "-", rest[1:]
	}
	intPart, frac, _ := strings.Cut(rest, ".")
	if frac != "" {
		frac = "." + frac
	}
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String() + frac
}

func byteSize(n int64) string {
	switch {
	case n < 1000 && n > -1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000 && n > -1000*1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1000)
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
}

func since(start time.Time) string {
	return time.Since(start).Round(10 * time.Millisecond).String()
}

func ok(err error) int {
	if err != nil {
		return 0
	}
	return 1
}

// dropSlot drops the demo's slot, ending the session that uses it if any:
// PostgreSQL refuses to drop a database that a slot belongs to.
func dropSlot(ctx context.Context, admin *pgx.Conn, name string) error {
	const active = "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL"
	for deadline := time.Now().Add(10 * time.Second); ; {
		tag, err := admin.Exec(ctx, active, name)
		if err != nil {
			return fmt.Errorf("PostgreSQL: end the session on slot %s: %w", name, err)
		}
		if tag.RowsAffected() == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("PostgreSQL: slot %s stays in use", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err := admin.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", name)
	if err != nil {
		return fmt.Errorf("PostgreSQL: drop slot %s: %w", name, err)
	}
	return nil
}

// pgConnect opens a connection, naming the server without its password.
func pgConnect(ctx context.Context, connString string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL %s: %w", replicator.Redact(connString), err)
	}
	return conn, nil
}

// withDatabase returns the connection string with its database replaced.
func withDatabase(connString, db string) (string, error) {
	if u, err := url.Parse(connString); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		u.RawPath = ""
		return u.String(), nil
	}
	if _, err := pgconn.ParseConfig(connString); err != nil {
		return "", fmt.Errorf("--pg %s: %w", replicator.Redact(connString), err)
	}
	return connString + " dbname=" + db, nil
}
