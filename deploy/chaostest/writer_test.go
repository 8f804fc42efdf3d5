package chaostest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// schemaSQL are the tables the writer changes: accounts takes most rows,
// docs has a TOASTed column stored out of line (uncompressed), so that
// updates that leave it alone send it as unchanged, and events is
// truncated now and then.
var schemaSQL = []string{
	`CREATE TABLE accounts (id bigint PRIMARY KEY, rev int NOT NULL, balance numeric(14,2) NOT NULL,
		code text NOT NULL, note text, updated timestamptz NOT NULL DEFAULT now())`,
	`CREATE TABLE docs (id bigint PRIMARY KEY, rev int NOT NULL, title text NOT NULL, body text NOT NULL)`,
	`ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL`,
	`CREATE TABLE events (id bigserial PRIMARY KEY, kind text NOT NULL, payload jsonb)`,
}

// tables are the replicated tables, as ferry's --tables takes them.
var tables = []string{"public.accounts", "public.docs", "public.events"}

const docBody = `repeat(md5(random()::text), 120)` // 3,840 bytes: TOASTed

// seedSQL fills the tables before ferry's first start.
func seedSQL(accounts int) []string {
	docs := max(accounts/100, 50)
	return []string{
		fmt.Sprintf(`INSERT INTO accounts (id, rev, balance, code, note)
			SELECT g, 1, g %% 1000, (g * 7 %% 100000)::text, md5(g::text) FROM generate_series(1, %d) g`, accounts),
		fmt.Sprintf(`INSERT INTO docs SELECT g, 1, 'doc ' || g, %s FROM generate_series(1, %d) g`, docBody, docs),
		`INSERT INTO events (kind, payload) SELECT 'seed', jsonb_build_object('n', g) FROM generate_series(1, 100) g`,
	}
}

// writer runs transactions of 1 to maxTx rows mixing inserts, updates,
// deletes, key changes, TOAST updates and truncates until stopped,
// reconnecting when the server goes away.
type writer struct {
	url   string
	maxTx int
	pause time.Duration
	rng   *rand.Rand
	next  map[string]int64 // next unused id of accounts and docs

	txs, rows atomic.Int64
	stopCh    chan struct{}
	done      chan struct{}
	mu        sync.Mutex
	fatal     error // an error that is not a lost connection
	lostConns int
}

func newWriter(url string, m mode, seedRows int, seed uint64) *writer {
	return &writer{url: url, maxTx: m.maxTx, pause: m.pause, rng: rand.New(rand.NewPCG(seed, 7)),
		next: map[string]int64{"accounts": int64(seedRows) + 1, "docs": int64(max(seedRows/100, 50)) + 1}}
}

// start runs the writer in the background.
func (w *writer) start() {
	w.stopCh, w.done = make(chan struct{}), make(chan struct{})
	go w.loop()
}

// stop ends the writer after its current transaction and returns any
// error other than a lost connection.
func (w *writer) stop() error {
	close(w.stopCh)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fatal
}

func (w *writer) loop() {
	defer close(w.done)
	ctx := context.Background()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(ctx)
		}
	}()
	for n := 0; ; n++ {
		select {
		case <-w.stopCh:
			return
		case <-time.After(w.pause):
		}
		if conn == nil {
			c, err := pgx.Connect(ctx, w.url)
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			conn = c
		}
		rows, err := w.transaction(ctx, conn, n)
		if err == nil {
			w.txs.Add(1)
			w.rows.Add(rows)
			continue
		}
		conn.Close(ctx)
		conn = nil
		w.mu.Lock()
		if isConnLoss(err) {
			w.lostConns++
		} else if w.fatal == nil {
			w.fatal = fmt.Errorf("writer: %w", err)
		}
		w.mu.Unlock()
	}
}

// isConnLoss tells a lost connection (server restarted) from a bad statement.
func isConnLoss(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57")
	}
	return true // not a server's answer: the connection broke
}

// size draws a transaction's row count: mostly small, now and then large.
func (w *writer) size() int {
	switch p := w.rng.IntN(100); {
	case p < 60:
		return 1 + w.rng.IntN(5)
	case p < 85:
		return 5 + w.rng.IntN(50)
	case p < 97:
		return 50 + w.rng.IntN(max(1, min(w.maxTx, 1000)-50))
	default:
		return 1 + w.rng.IntN(w.maxTx)
	}
}

// transaction runs one transaction and returns the rows it changed.
func (w *writer) transaction(ctx context.Context, conn *pgx.Conn, n int) (int64, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	var rows int64
	left := w.size()
	for left > 0 {
		q, args, k := w.statement(left)
		tag, err := tx.Exec(ctx, q, args...)
		if err != nil {
			return 0, err
		}
		rows += tag.RowsAffected()
		left -= k
	}
	if n%150 == 149 {
		if _, err := tx.Exec(ctx, `TRUNCATE events`); err != nil {
			return 0, err
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO events (kind, payload) VALUES ('tx', jsonb_build_object('n', $1::int))`, n); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	return rows + 1, nil
}

// statement picks a statement touching at most left rows; k is how many
// it is meant to touch. Ids are taken from the counters before the
// statement runs, so a transaction lost with its connection never makes a
// later one reuse an id.
func (w *writer) statement(left int) (q string, args []any, k int) {
	chunk := func(limit int) int { return 1 + w.rng.IntN(max(1, min(left, limit))) }
	take := func(table string, k int) int64 { id := w.next[table]; w.next[table] += int64(k); return id }
	some := func(table string) int64 { return 1 + w.rng.Int64N(w.next[table]-1) }
	switch p := w.rng.IntN(100); {
	case p < 30:
		k = chunk(5000)
		return `INSERT INTO accounts (id, rev, balance, code, note)
			SELECT g, 1, g % 1000, (g * 7 % 100000)::text, md5(g::text) FROM generate_series($1::bigint, $1::bigint + $2 - 1) g`,
			[]any{take("accounts", k), k}, k
	case p < 55:
		k = chunk(5000)
		return `UPDATE accounts SET rev = rev + 1, balance = balance + 1, code = ((id + rev) * 7 % 100000)::text, updated = now()
			WHERE id >= $1 AND id < $1 + $2`, []any{some("accounts"), k}, k
	case p < 63:
		k = chunk(50)
		return `DELETE FROM accounts WHERE id >= $1 AND id < $1 + $2`, []any{some("accounts"), k}, k
	case p < 70:
		k = chunk(100)
		from := some("accounts")
		return `UPDATE accounts SET id = id + $3, rev = rev + 1 WHERE id >= $1 AND id < $1 + $2`,
			[]any{from, k, take("accounts", k) - from}, k
	case p < 75:
		k = chunk(20)
		return `INSERT INTO docs SELECT g, 1, 'doc ' || g, ` + docBody + ` FROM generate_series($1::bigint, $1::bigint + $2 - 1) g`,
			[]any{take("docs", k), k}, k
	case p < 85:
		k = chunk(200)
		return `UPDATE docs SET rev = rev + 1, title = 'doc ' || id || ' r' || (rev + 1) WHERE id >= $1 AND id < $1 + $2`,
			[]any{some("docs"), k}, k
	case p < 89:
		k = chunk(20)
		return `UPDATE docs SET rev = rev + 1, body = ` + docBody + ` WHERE id >= $1 AND id < $1 + $2`,
			[]any{some("docs"), k}, k
	case p < 92:
		k = chunk(20)
		from := some("docs")
		return `UPDATE docs SET id = id + $3, rev = rev + 1 WHERE id >= $1 AND id < $1 + $2`,
			[]any{from, k, take("docs", k) - from}, k
	case p < 95:
		k = chunk(10)
		return `DELETE FROM docs WHERE id >= $1 AND id < $1 + $2`, []any{some("docs"), k}, k
	default:
		k = chunk(500)
		return `INSERT INTO events (kind, payload) SELECT 'bulk', jsonb_build_object('g', g, 's', md5(g::text))
			FROM generate_series(1, $1::int) g`, []any{k}, k
	}
}
