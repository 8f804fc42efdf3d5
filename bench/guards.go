package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// checkpoints reads how many checkpoints the server has started:
// pg_stat_checkpointer from PostgreSQL 17 on, pg_stat_bgwriter before.
// A spread checkpoint publishes its count while it runs, an immediate one
// when it is done.
func checkpoints(ctx context.Context, db *pgxpool.Pool, versionNum int) (int64, error) {
	q := `SELECT (checkpoints_timed + checkpoints_req)::bigint FROM pg_stat_bgwriter`
	if versionNum >= 170000 {
		q = `SELECT (num_timed + num_requested)::bigint FROM pg_stat_checkpointer`
	}
	var n int64
	if err := db.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("read checkpoint count: %w", err)
	}
	return n, nil
}

// checkpoint runs CHECKPOINT and waits until the checkpointer's statistics
// show it: the checkpointer wakes the waiting backend before it publishes
// its counts, so reading them right away reads the previous checkpoint's.
func (b *bencher) checkpoint(ctx context.Context) error {
	v := b.res.Settings.ServerVersionNum
	before, err := checkpoints(ctx, b.db, v)
	if err != nil {
		return err
	}
	if _, err := b.db.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := checkpoints(ctx, b.db, v)
		if err != nil {
			return err
		}
		if n > before {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the checkpointer's statistics did not show the CHECKPOINT after 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// benchCatalogs are the system catalogs of the database that the
// benchmark's own DDL changes on every run: a table (its partitions,
// sequence, index, constraint, defaults) dropped and created, its
// reloptions and statistics, the CDC publication.
var benchCatalogs = []string{"pg_class", "pg_attribute", "pg_type", "pg_depend", "pg_constraint", "pg_index",
	"pg_attrdef", "pg_sequence", "pg_inherits", "pg_partitioned_table", "pg_statistic", "pg_publication",
	"pg_publication_rel"}

// settleCatalogs analyzes and then vacuums benchCatalogs before a window
// opens. Run after run, the DDL's dead and changed catalog rows reach
// autovacuum's thresholds (hash8, nine tables a run, within a few runs),
// and autovacuum then works on a catalog inside a window, which discards
// the run; done here, outside the window, it leaves autovacuum nothing to
// do. The ANALYZE goes first because it rewrites the catalogs' own rows
// of pg_statistic, and the VACUUM waits (up to horizonWait) until no
// transaction or logical slot of the server can still see the rows made
// dead, which no VACUUM could remove before. It returns what still saw
// them when the wait ran out: then autovacuum may yet start inside the
// window, which the window's own watch reports.
func (b *bencher) settleCatalogs(ctx context.Context) (holders []string, err error) {
	names := make([]string, len(benchCatalogs))
	for i, c := range benchCatalogs {
		names[i] = "pg_catalog." + c
	}
	list := strings.Join(names, ", ")
	if _, err := b.db.Exec(ctx, "ANALYZE "+list); err != nil {
		return nil, fmt.Errorf("analyze the catalogs the benchmark's DDL changed: %w", err)
	}
	var xid string
	if err := b.db.QueryRow(ctx, `SELECT txid_current()::text`).Scan(&xid); err != nil {
		return nil, fmt.Errorf("read the transaction ID: %w", err)
	}
	deadline := time.Now().Add(horizonWait)
	for {
		var stuck bool
		if holders, stuck, err = catalogHorizonHolders(ctx, b.db, xid); err != nil {
			return nil, err
		}
		if len(holders) == 0 || stuck || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := b.db.Exec(ctx, "VACUUM "+list); err != nil {
		return nil, fmt.Errorf("vacuum the catalogs the benchmark's DDL changed: %w", err)
	}
	return holders, nil
}

// horizonWait bounds settleCatalogs' wait for the server's horizon: a
// logical slot's catalog_xmin moves on when its consumer has decoded a
// snapshot record (the server logs one every 15 s, and at a checkpoint).
const horizonWait = 30 * time.Second

// catalogHorizonHolders names the logical slots (of any database: a slot's
// catalog_xmin holds back the catalogs of every one) and the other
// sessions that may still see catalog rows deleted by transaction xid or
// before it. stuck: every holder is a slot no consumer reads, whose
// catalog_xmin moves only when one connects (a slot a crashed or removed
// consumer left behind), so waiting for the horizon is in vain.
func catalogHorizonHolders(ctx context.Context, db interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, xid string) (holders []string, stuck bool, err error) {
	rows, err := db.Query(ctx, `SELECT 'slot ' || slot_name || CASE WHEN active THEN '' ELSE ' (inactive)' END, NOT active
			FROM pg_replication_slots
			WHERE catalog_xmin IS NOT NULL AND catalog_xmin::text::bigint <= $1::bigint % 4294967296
		UNION ALL SELECT 'backend ' || pid || ' (' || coalesce(datname, '?') || ', ' || left(query, 60) || ')', false FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND coalesce(backend_xmin, backend_xid)::text::bigint <= $1::bigint % 4294967296`, xid)
	if err != nil {
		return nil, false, fmt.Errorf("read the server's transaction horizon: %w", err)
	}
	defer rows.Close()
	stuck = true
	for rows.Next() {
		var h string
		var inactive bool
		if err := rows.Scan(&h, &inactive); err != nil {
			return nil, false, fmt.Errorf("read the server's transaction horizon: %w", err)
		}
		holders = append(holders, h)
		stuck = stuck && inactive
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("read the server's transaction horizon: %w", err)
	}
	return holders, stuck && len(holders) > 0, nil
}

// autovacuumRuns reads the autovacuum and autoanalyze counts of the
// strategy's heaps.
func autovacuumRuns(ctx context.Context, db *pgxpool.Pool, heaps []uint32) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, `SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0)::bigint
		FROM pg_stat_all_tables WHERE relid = ANY($1::oid[])`, heaps).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read autovacuum counts: %w", err)
	}
	return n, nil
}

// autovacWatch samples the server's autovacuum workers, in every
// database, ten times a second while a window is open: their WAL would
// count as the workload's.
type autovacWatch struct {
	seen map[string]int
	stop chan struct{}
	done sync.WaitGroup
	err  error
}

func startAutovacWatch(ctx context.Context, db *pgxpool.Pool) *autovacWatch {
	w := &autovacWatch{seen: map[string]int{}, stop: make(chan struct{})}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if err := w.sample(ctx, db); err != nil && w.err == nil && ctx.Err() == nil {
				w.err = err
			}
			select {
			case <-ctx.Done():
				return
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *autovacWatch) sample(ctx context.Context, db *pgxpool.Pool) error {
	rows, err := db.Query(ctx, `SELECT coalesce(datname, '?') || ': ' || coalesce(nullif(query, ''), 'autovacuum')
		FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' AND state = 'active'`)
	if err != nil {
		return fmt.Errorf("sample autovacuum workers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			return fmt.Errorf("sample autovacuum workers: %w", err)
		}
		w.seen[q]++
	}
	return rows.Err()
}

// finish stops the watch and lists what it saw, most samples first.
func (w *autovacWatch) finish() ([]string, error) {
	close(w.stop)
	w.done.Wait()
	out := make([]string, 0, len(w.seen))
	for q := range w.seen {
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool {
		return w.seen[out[i]] > w.seen[out[j]] || w.seen[out[i]] == w.seen[out[j]] && out[i] < out[j]
	})
	return out, w.err
}

// Guard checks: a run that fails one was disturbed by something other
// than its workload. It is discarded, or with Config.KeepDisturbed kept
// and marked.
const (
	guardCheckpoint = "no checkpoint in the window"
	guardAutovacuum = "no autovacuum in the window"
	guardForeignWAL = "other databases wrote under 1% of the window's WAL"
)

func isGuard(name string) bool {
	return name == guardCheckpoint || name == guardAutovacuum || name == guardForeignWAL
}

// windowGuards judges a window by the checkpoint counts around it (c0 at
// its start, cEnd at its end, cAfter after the post-run CHECKPOINT, which
// adds one when ownAfter), the checkpoint records in its WAL, and the
// autovacuum activity seen.
func windowGuards(run int, start int64, c0, cEnd, cAfter int64, ownAfter bool, redo []int64, autovac []string, ownAutovac int64) []Check {
	ck := Check{Run: run, Name: guardCheckpoint, Passed: true, Detail: fmt.Sprintf("checkpoint count %d at the start and %d at the end", c0, cEnd)}
	extra := cAfter - c0
	if ownAfter {
		extra--
	}
	var inWAL []string
	for _, r := range redo {
		if r >= start {
			inWAL = append(inWAL, lsnText(r))
		}
	}
	switch {
	case cEnd > c0:
		ck.Passed, ck.Detail = false, fmt.Sprintf("%d checkpoints started in the window", cEnd-c0)
	case len(inWAL) > 0:
		ck.Passed, ck.Detail = false, "the window's WAL holds a checkpoint with redo at "+strings.Join(inWAL, ", ")
	case extra > 0:
		ck.Passed, ck.Detail = false, fmt.Sprintf("%d checkpoints besides the benchmark's between the window's start and the post-run CHECKPOINT", extra)
	}
	av := Check{Run: run, Name: guardAutovacuum, Passed: len(autovac) == 0 && ownAutovac == 0, Detail: "no autovacuum worker active, none on the bench table"}
	if !av.Passed {
		av.Detail = fmt.Sprintf("%d autovacuum or autoanalyze runs on the bench table; workers seen: %s", ownAutovac, strings.Join(autovac, "; "))
	}
	return []Check{ck, av}
}

func foreignGuard(run int, st walStats) Check {
	c := Check{Run: run, Name: guardForeignWAL, Passed: true}
	share := 0.0
	if st.RecordBytes > 0 {
		share = float64(st.ForeignBytes) / float64(st.RecordBytes)
	}
	c.Passed = share < 0.01
	c.Detail = fmt.Sprintf("%d of %d record bytes (%.2f%%) and %d of %d full-page images change other databases", st.ForeignBytes,
		st.RecordBytes, 100*share, st.ForeignFPI, st.FPI)
	return c
}
