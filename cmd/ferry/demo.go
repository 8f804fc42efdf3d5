package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ferry-cdc/ferry/loader/clickhouse"
	"github.com/ferry-cdc/ferry/replicator"
)

// demoName names everything the demo owns: the PostgreSQL and ClickHouse
// databases, the replication slot and the publication.
const demoName = "ferry_demo"

// demoCustomers is how many customers the demo seeds.
const demoCustomers = 10000

type demoCmd struct {
	connFlags
	Orders       int           `help:"Orders to seed before replication starts." default:"3000000"`
	WritesPerSec int           `name:"writes-per-sec" help:"Rate of the write stream (new orders, status updates, a few deletes) while ferry replicates." default:"200"`
	Duration     time.Duration `help:"How long to stream while the writes go on." default:"20s"`
	Follow       bool          `help:"Keep the writes and the stream going, printing the lag every 2 s, until Ctrl-C (instead of --duration and the comparison)." env:"FERRY_DEMO_FOLLOW"`
	// name replaces demoName, so that tests run beside a demo, and beside
	// each other, on one stack.
	name string
}

// dbName names the demo's databases, slot and publication.
func (c *demoCmd) dbName() string {
	if c.name != "" {
		return c.name
	}
	return demoName
}

// Run (re)creates the ferry_demo databases, seeds them, replicates them
// while writes go on and compares both sides. --ch-database is ignored: the
// demo always writes to ClickHouse database ferry_demo.
func (c *demoCmd) Run(ctx context.Context, log *zap.Logger) error {
	err := runDemo(ctx, c, log, os.Stdout)
	if err != nil && ctx.Err() != nil {
		fmt.Println("\nInterrupted. Run `ferry demo` again to start over.")
		return nil
	}
	return err
}

// demo holds the demo's connections. The replicator gets its own.
type demo struct {
	cfg      *demoCmd
	out      io.Writer
	log      *zap.Logger // the replicator's and the sink's, warnings and up
	adminURL string      // FERRY_PG_URL's server, a database other than the demo's
	dbURL    string      // the demo's database
	ch       driver.Conn
	sink     *clickhouse.Sink
	pg       *pgx.Conn // the demo's database, for counts and the query
	finalLag string    // the slot's lag right after the final catch-up
}

func runDemo(ctx context.Context, c *demoCmd, log *zap.Logger, out io.Writer) error {
	if c.Orders < 1 || c.WritesPerSec < 0 || c.Duration < 0 {
		return errors.New("demo: --orders must be at least 1, --writes-per-sec and --duration not negative")
	}
	d := &demo{cfg: c, out: out, log: log.Named("demo").WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))}
	defer d.close()
	if c.CHCAFile != "" || c.chPassword != "" {
		return errors.New("demo: --ch-ca-file and a ClickHouse password apart from --ch are not supported: the demo is for the local stack (put a password into --ch)")
	}
	if c.CHDatabase != "" && c.CHDatabase != c.dbName() {
		d.say("Note: --ch-database (FERRY_CH_DATABASE) is ignored: the demo always uses %s.", c.dbName())
	}
	if err := d.connect(ctx); err != nil {
		return err
	}
	return d.run(ctx)
}

// connect works out the URLs and opens the ClickHouse connection.
func (d *demo) connect(ctx context.Context) error {
	var err error
	if d.dbURL, err = withDatabase(d.cfg.PG, d.cfg.dbName()); err != nil {
		return err
	}
	d.adminURL = d.cfg.PG
	if cfg, err := pgconn.ParseConfig(d.cfg.PG); err == nil && cfg.Database == d.cfg.dbName() {
		d.adminURL, _ = withDatabase(d.cfg.PG, "postgres") // the demo's database is about to go
	}
	opts, err := ch.ParseDSN(d.cfg.CH)
	if err != nil {
		return fmt.Errorf("--ch %s: %w", replicator.Redact(d.cfg.CH), err)
	}
	opts.Auth.Database = "" // ferry_demo may not exist yet; every name is qualified
	if d.ch, err = ch.Open(opts); err == nil {
		err = d.ch.Ping(ctx)
	}
	if err != nil {
		return fmt.Errorf("connect to ClickHouse %s: %w", replicator.Redact(d.cfg.CH), err)
	}
	return nil
}

func (d *demo) close() {
	if d.pg != nil {
		d.pg.Close(context.Background())
	}
	if d.sink != nil {
		d.sink.Close()
	}
	if d.ch != nil {
		d.ch.Close()
	}
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, format+"\n", args...)
}

func (d *demo) run(ctx context.Context) error {
	d.say("ferry demo: PostgreSQL %s, ClickHouse %s; database, slot and publication %s\n",
		replicator.Redact(d.adminURL), replicator.Redact(d.cfg.CH), d.cfg.dbName())
	start := time.Now()
	if err := d.reset(ctx); err != nil {
		return err
	}
	d.say("[1/5] Recreated database %s in PostgreSQL and in ClickHouse %s (%s)", d.cfg.dbName(), d.sink.ServerVersion(), since(start))
	start = time.Now()
	maxID, err := d.seed(ctx)
	if err != nil {
		return err
	}
	d.say("[2/5] Seeded %s customers and %s orders over the last 12 months (%s)", thousands(demoCustomers), thousands(int64(d.cfg.Orders)), since(start))
	w, err := startWriter(ctx, d.dbURL, d.cfg.WritesPerSec, maxID)
	if err != nil {
		return err
	}
	defer w.stop() //nolint:errcheck // only on an early return; the error is reported below
	d.say("[3/5] Writing %d changes/s, each its own transaction: new orders, status updates, a few deletes", d.cfg.WritesPerSec)
	start = time.Now()
	if err := d.replicate(ctx, true); err != nil {
		return err
	}
	if d.cfg.Follow {
		d.say("[4/5] Initial copy and catch-up into ClickHouse took %s; now streaming until Ctrl-C:", since(start))
		return d.follow(ctx, w)
	}
	d.say("[4/5] Initial copy and catch-up into ClickHouse took %s; now streaming for %s:", since(start), d.cfg.Duration)
	if err := d.stream(ctx, w); err != nil {
		return err
	}
	return d.report(ctx)
}

// replicate runs ferry's replicator on the demo's database until ctx is
// done or, with catchUp, until it has stored what was committed before.
func (d *demo) replicate(ctx context.Context, catchUp bool) error {
	rep, err := replicator.New(replicator.Config{
		ConnString:  d.dbURL,
		Slot:        d.cfg.dbName(),
		Publication: d.cfg.dbName(),
		Tables:      []string{"public.customers", "public.orders"},
		CatchUp:     catchUp,
		Logger:      d.log,
	}, d.sink, d.sink, d.sink.Capabilities(), clickhouse.IsRetryable)
	if err != nil {
		return err
	}
	if err := rep.Run(ctx); err != nil {
		return err
	}
	return ctx.Err() // a cancelled run returns nil
}

// stream replicates for --duration, printing progress every 2 s, then
// stops the writes and the stream and runs a final catch-up.
func (d *demo) stream(ctx context.Context, w *writer) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- d.replicate(sctx, false) }()
	d.say("\n%8s  %18s  %18s  %10s  %8s", "elapsed", "orders, PostgreSQL", "orders, ClickHouse", "slot lag", "writes")
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	end := time.After(d.cfg.Duration)
	start := time.Now()
	for running := true; running; {
		select {
		case err := <-errc:
			return fmt.Errorf("replication stopped early: %w", err)
		case <-end:
			running = false
		case <-tick.C:
			if err := d.progress(ctx, start, w.n.Load()); err != nil {
				return err
			}
		}
	}
	stats, err := w.stop()
	if err != nil {
		return fmt.Errorf("the writes failed: %w", err)
	}
	cancel()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	start = time.Now()
	if err := d.replicate(ctx, true); err != nil {
		return err
	}
	if d.finalLag, err = d.lag(ctx); err != nil {
		return err
	}
	d.say("\n[5/5] Stopped the writes (%s new orders, %s status updates, %s deletes); final catch-up took %s",
		thousands(int64(stats.inserts)), thousands(int64(stats.updates)), thousands(int64(stats.deletes)), since(start))
	return nil
}

// follow replicates while the writes go on, printing progress every 2 s,
// until ctx is done (Ctrl-C); then it stops the writes, lets the stream
// flush and confirm, and says where to look. The slot stays.
func (d *demo) follow(ctx context.Context, w *writer) error {
	errc := make(chan error, 1)
	go func() { errc <- d.replicate(ctx, false) }()
	d.say("\n%8s  %18s  %18s  %10s  %8s", "elapsed", "orders, PostgreSQL", "orders, ClickHouse", "slot lag", "writes")
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	start := time.Now()
	for ctx.Err() == nil {
		select {
		case err := <-errc:
			if ctx.Err() != nil {
				errc <- err
				break
			}
			return fmt.Errorf("replication stopped: %w", err)
		case <-ctx.Done():
		case <-tick.C:
			if err := d.progress(ctx, start, w.n.Load()); err != nil && ctx.Err() == nil {
				return err
			}
		}
	}
	stats, werr := w.stop()
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	d.say("\n[5/5] Stopped after %s: the writes made %s new orders, %s status updates and %s deletes; ferry flushed and confirmed what it had.",
		time.Since(start).Round(time.Second), thousands(int64(stats.inserts)), thousands(int64(stats.updates)), thousands(int64(stats.deletes)))
	if werr != nil {
		d.say("The writes had failed: %v", werr)
	}
	d.hints()
	return nil
}

func (d *demo) progress(ctx context.Context, start time.Time, writes int64) error {
	pgRows, chRows, err := d.counts(ctx, "orders")
	if err != nil {
		return err
	}
	lag, err := d.lag(ctx)
	if err != nil {
		return err
	}
	d.say("%8s  %18s  %18s  %10s  %8s", time.Since(start).Round(time.Second), thousands(pgRows), thousands(chRows), lag, thousands(writes))
	return nil
}

// reset drops and recreates the demo's databases and slot.
func (d *demo) reset(ctx context.Context) error {
	admin, err := pgConnect(ctx, d.adminURL)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	if err := dropSlot(ctx, admin, d.cfg.dbName()); err != nil {
		return err
	}
	for _, sql := range []string{
		"DROP DATABASE IF EXISTS " + d.cfg.dbName() + " WITH (FORCE)",
		"CREATE DATABASE " + d.cfg.dbName(),
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			return fmt.Errorf("PostgreSQL: %s: %w", sql, err)
		}
	}
	for _, sql := range []string{"DROP DATABASE IF EXISTS " + d.cfg.dbName(), "CREATE DATABASE " + d.cfg.dbName()} {
		if err := d.ch.Exec(ctx, sql); err != nil {
			return fmt.Errorf("ClickHouse: %s: %w", sql, err)
		}
	}
	if d.sink, err = clickhouse.New(ctx, clickhouse.Config{DSN: d.cfg.CH, Database: d.cfg.dbName(), Logger: d.log}); err != nil {
		return err
	}
	d.pg, err = pgConnect(ctx, d.dbURL)
	return err
}

// seedSQL creates and fills the example schema. Order ids grow with
// created_at, so the recent orders are the ones with the highest ids.
func seedSQL(orders int) []string {
	return []string{
		`CREATE TABLE customers (id bigint PRIMARY KEY, name text, country text, created_at timestamptz)`,
		`CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id bigint REFERENCES customers, total numeric(10,2), status text, created_at timestamptz)`,
		fmt.Sprintf(`INSERT INTO customers
		 SELECT i, 'Customer ' || i,
		        (ARRAY['US','DE','GB','FR','JP','BR','IN','CA','NL','ES','IT','SE'])[1 + floor(12 * power(random(), 1.5))::int],
		        now() - interval '3 years' * random()
		 FROM generate_series(1, %d) AS i`, demoCustomers),
		fmt.Sprintf(`INSERT INTO orders (customer_id, total, status, created_at)
		 SELECT 1 + floor(random() * %d)::bigint,
		        round((5 + 495 * power(random(), 2))::numeric, 2),
		        (ARRAY['delivered','delivered','delivered','delivered','shipped','paid','cancelled'])[1 + floor(random() * 7)::int],
		        now() - interval '365 days' * (1 - i::float8 / %d)
		 FROM generate_series(1, %d) AS i`, demoCustomers, orders, orders),
		`ANALYZE customers, orders`,
	}
}

// seed creates the example schema and returns the highest order id.
func (d *demo) seed(ctx context.Context) (int64, error) {
	for _, sql := range seedSQL(d.cfg.Orders) {
		if _, err := d.pg.Exec(ctx, sql); err != nil {
			return 0, fmt.Errorf("PostgreSQL: seed: %w", err)
		}
	}
	var maxID int64
	err := d.pg.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM orders").Scan(&maxID)
	return maxID, err
}

// writer runs the stream of writes on a connection of its own.
type writer struct {
	once  sync.Once
	halt  chan struct{} // closed by stop; a write under way finishes first
	done  chan struct{}
	n     atomic.Int64 // writes so far
	maxID int64
	stats writeStats
	err   error
}

// writeStats counts the changes made.
type writeStats struct{ inserts, updates, deletes int }

func startWriter(ctx context.Context, dbURL string, rate int, maxID int64) (*writer, error) {
	conn, err := pgConnect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	w := &writer{halt: make(chan struct{}), done: make(chan struct{}), maxID: maxID}
	go func() {
		defer close(w.done)
		defer conn.Close(context.Background())
		w.err = w.loop(ctx, conn, rate)
	}()
	return w, nil
}

// stop ends the writes and returns what they did; it may be called twice.
// It waits for the write under way to commit rather than cancel it: a
// cancelled statement may still commit after the final catch-up started.
func (w *writer) stop() (writeStats, error) {
	w.once.Do(func() { close(w.halt) })
	<-w.done
	return w.stats, w.err
}

// loop writes rate times a second until stopped or ctx is done.
func (w *writer) loop(ctx context.Context, conn *pgx.Conn, rate int) error {
	if rate == 0 {
		select {
		case <-ctx.Done():
		case <-w.halt:
		}
		return nil
	}
	start := time.Now()
	for done := int64(0); ; done++ {
		next := start.Add(time.Duration(done) * time.Second / time.Duration(rate))
		if late := time.Since(next); late > time.Second { // don't burst after a stall
			start = start.Add(late - time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.halt:
			return nil
		case <-time.After(time.Until(next)):
		}
		if err := w.write(ctx, conn); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		w.n.Add(1)
	}
}

var statuses = []string{"paid", "shipped", "delivered", "cancelled"}

// write makes one change: mostly new orders and status updates of recent
// orders, now and then a delete.
func (w *writer) write(ctx context.Context, conn *pgx.Conn) error {
	recent := func(n int64) int64 { return w.maxID - rand.Int64N(min(n, w.maxID)) }
	switch p := rand.IntN(100); {
	case p < 60 || w.maxID == 0:
		err := conn.QueryRow(ctx, `INSERT INTO orders (customer_id, total, status, created_at)
			VALUES (1 + floor(random() * $1::bigint)::bigint, round((5 + 495 * power(random(), 2))::numeric, 2), 'pending', now())
			RETURNING id`, demoCustomers).Scan(&w.maxID)
		w.stats.inserts += ok(err)
		return err
	case p < 97:
		tag, err := conn.Exec(ctx, "UPDATE orders SET status = $1 WHERE id = $2", statuses[rand.IntN(len(statuses))], recent(2000))
		w.stats.updates += int(tag.RowsAffected())
		return err
	default:
		tag, err := conn.Exec(ctx, "DELETE FROM orders WHERE id = $1", recent(5000))
		w.stats.deletes += int(tag.RowsAffected())
		return err
	}
}
