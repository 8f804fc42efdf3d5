// Command perfload measures ferry's commit-to-visible latency: it inserts
// rows into a PostgreSQL table at a fixed rate, in small transactions,
// recording when each commit returned, while it polls the ClickHouse copy
// of the table for the highest id visible and records when each
// transaction's last id first shows. It prints the latencies' percentiles.
//
// The table needs columns id bigint (the key), customer_id bigint,
// total numeric(10,2) and note text; perfload writes ids 1, 2, 3, ... in
// order, so once id n is visible every transaction up to it is (ferry
// writes a table's rows in commit order). A latency is an upper bound: it
// includes up to one poll interval and the poll query's own time.
//
// deploy/perf.sh runs it; it is a benchmark tool, not part of ferry.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5"
)

type config struct {
	pg, ch, table, chTable string
	rate, txnRows          int
	duration, poll, drain  time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.pg, "pg", os.Getenv("FERRY_PG_URL"), "PostgreSQL URL of the database")
	flag.StringVar(&c.ch, "ch", os.Getenv("FERRY_CH_URL"), "ClickHouse URL (native protocol)")
	flag.StringVar(&c.table, "table", "orders", "PostgreSQL table")
	flag.StringVar(&c.chTable, "ch-table", "", "ClickHouse table, database.table")
	flag.IntVar(&c.rate, "rate", 10000, "rows per second")
	flag.IntVar(&c.txnRows, "txn-rows", 100, "rows per transaction")
	flag.DurationVar(&c.duration, "duration", time.Minute, "how long to write")
	flag.DurationVar(&c.poll, "poll", 20*time.Millisecond, "ClickHouse poll interval")
	flag.DurationVar(&c.drain, "drain", 30*time.Second, "how long to wait for the last rows after writing")
	flag.Parse()
	if c.pg == "" || c.ch == "" || c.chTable == "" || c.rate <= 0 || c.txnRows <= 0 {
		fmt.Fprintln(os.Stderr, "perfload: -pg, -ch, -ch-table, a positive -rate and -txn-rows are required")
		os.Exit(2)
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "perfload:", err)
		os.Exit(1)
	}
}

// timeline is what the writer committed and the poller saw, per transaction.
type timeline struct {
	mu        sync.Mutex
	committed []time.Time // by transaction number
	visible   []time.Time // by transaction number, for those seen so far
}

func run(ctx context.Context, c config) error {
	conn, err := pgx.Connect(ctx, c.pg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	opts, err := ch.ParseDSN(c.ch)
	if err != nil {
		return err
	}
	chc, err := ch.Open(opts)
	if err != nil {
		return err
	}
	defer chc.Close()
	tl := &timeline{}
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	polled := make(chan error, 1)
	go func() { polled <- poll(pollCtx, chc, c, tl) }()
	start := time.Now()
	written, err := write(ctx, conn, c, tl)
	took := time.Since(start)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(c.drain)
	for time.Now().Before(deadline) && tl.seen() < written {
		time.Sleep(c.poll)
	}
	stopPoll()
	if err := <-polled; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return report(c, tl, written, took)
}

// write inserts txnRows rows per transaction, paced to c.rate rows per
// second on average, for c.duration, and returns the transactions written.
func write(ctx context.Context, conn *pgx.Conn, c config, tl *timeline) (int, error) {
	interval := time.Duration(float64(time.Second) * float64(c.txnRows) / float64(c.rate))
	sql := fmt.Sprintf(`INSERT INTO %s (id, customer_id, total, note)
		SELECT g, g %% 10000, (g %% 100000) / 100.0, 'steady ' || g FROM generate_series($1::bigint, $2::bigint) g`,
		pgx.Identifier{c.table}.Sanitize())
	start := time.Now()
	n := 0
	for time.Since(start) < c.duration {
		if wait := time.Until(start.Add(time.Duration(n) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		first := int64(n)*int64(c.txnRows) + 1
		if _, err := conn.Exec(ctx, sql, first, first+int64(c.txnRows)-1); err != nil {
			return n, fmt.Errorf("insert transaction %d: %w", n, err)
		}
		at := time.Now()
		tl.mu.Lock()
		tl.committed = append(tl.committed, at)
		tl.mu.Unlock()
		n++
	}
	return n, nil
}

// poll reads the highest id in ClickHouse every c.poll and marks the
// transactions it covers visible at the time the answer came.
func poll(ctx context.Context, chc ch.Conn, c config, tl *timeline) error {
	q := fmt.Sprintf("SELECT max(id) FROM %s", c.chTable)
	t := time.NewTicker(c.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		var top int64
		if err := chc.QueryRow(ctx, q).Scan(&top); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue // the table may not exist yet
		}
		at := time.Now()
		txns := int(top / int64(c.txnRows)) // transactions wholly visible
		tl.mu.Lock()
		for len(tl.visible) < txns && len(tl.visible) < len(tl.committed) {
			tl.visible = append(tl.visible, at)
		}
		tl.mu.Unlock()
	}
}

func (tl *timeline) seen() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.visible)
}

// report prints one line of key=value figures, for deploy/perf.sh.
func report(c config, tl *timeline, written int, took time.Duration) error {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	lat := make([]float64, len(tl.visible))
	for i, v := range tl.visible {
		lat[i] = float64(v.Sub(tl.committed[i])) / float64(time.Millisecond)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	rows := written * c.txnRows
	fmt.Printf("rows=%d txns=%d rows_per_s=%.0f p50_ms=%.0f p99_ms=%.0f max_ms=%.0f unseen=%d\n",
		rows, written, float64(rows)/took.Seconds(), pct(0.50), pct(0.99), pct(1), written-len(lat))
	if len(lat) < written {
		return fmt.Errorf("%d of %d transactions were not visible in ClickHouse %s after writing ended", written-len(lat), written, c.drain)
	}
	return nil
}
