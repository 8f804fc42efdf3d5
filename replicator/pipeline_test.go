package replicator_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestSnapshotThenStream writes rows before, during and after the slot's
// creation, then every kind of change, and checks that ClickHouse ends up
// with exactly PostgreSQL's rows.
func TestSnapshotThenStream(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE orders (id bigserial PRIMARY KEY, customer int NOT NULL, total numeric(10,2), note text, created timestamptz DEFAULT now())`,
		`CREATE TABLE events (id int PRIMARY KEY, kind text)`,
		`INSERT INTO orders (customer, total, note) SELECT g % 97, g / 7.0, 'before ' || g FROM generate_series(1, 5000) g`,
		`INSERT INTO events SELECT g, 'e' || g FROM generate_series(1, 100) g`)

	// A writer commits single-row transactions while the slot is created
	// and the tables are copied.
	var wg sync.WaitGroup
	var written atomic.Int64
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := pgx.Connect(context.Background(), e.pgURL)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := conn.Exec(context.Background(), `INSERT INTO orders (customer, total, note) VALUES (1, 1.5, 'during')`); err != nil {
				t.Error(err)
				return
			}
			written.Add(1)
		}
	}()
	cfg := e.config()
	e.mustCatchUp(cfg)
	close(stop)
	wg.Wait()
	if written.Load() == 0 {
		t.Fatal("the concurrent writer wrote nothing")
	}
	e.mustCatchUp(cfg)
	counts := e.verifyAll(cfg)
	if want := uint64(5000 + written.Load()); counts["public.orders"] != want {
		t.Errorf("orders: %d rows, want %d", counts["public.orders"], want)
	}

	e.exec(`INSERT INTO orders (customer, total, note) SELECT 2, g, 'after' FROM generate_series(1, 1000) g`,
		`UPDATE orders SET note = 'updated', total = total + 1 WHERE id % 10 = 0`,
		`UPDATE orders SET id = id + 1000000 WHERE id <= 50`, // primary key changes
		`DELETE FROM orders WHERE id BETWEEN 100 AND 199`,
		`BEGIN; INSERT INTO orders (id, customer, note) VALUES (-1, 3, 'short-lived'); UPDATE orders SET note = 'twice' WHERE id = -1; UPDATE orders SET note = 'thrice' WHERE id = -1; DELETE FROM orders WHERE id = -1; COMMIT`,
		`BEGIN; INSERT INTO orders (id, customer, note) VALUES (-2, 3, 'v1'); UPDATE orders SET note = 'v2', id = -3 WHERE id = -2; COMMIT`,
		`BEGIN; DELETE FROM orders WHERE id = 300; INSERT INTO orders (id, customer, note) VALUES (300, 9, 'reborn'); COMMIT`,
		`BEGIN; TRUNCATE events; INSERT INTO events VALUES (1, 'after truncate'); COMMIT`)
	e.mustCatchUp(cfg)
	counts = e.verifyAll(cfg)
	if counts["public.events"] != 1 {
		t.Errorf("events: %d rows after TRUNCATE and one insert, want 1", counts["public.events"])
	}
	sameRows(t, "orders -3 and 300",
		e.chStrings("SELECT toString(id), note FROM "+e.table("orders")+" FINAL WHERE _ferry_deleted = 0 AND id IN (-3, -1, 300, 1, 1000001) ORDER BY id"),
		[][]string{{"-3", "v2"}, {"300", "reborn"}, {"1000001", "before 1"}})

	// Nothing is pending: a further catch-up returns at once and changes nothing.
	e.mustCatchUp(cfg)
	e.verifyAll(cfg)
}

// TestToastUnchanged updates rows whose 100 kB values PostgreSQL stores out
// of line, uncompressed, so pgoutput sends them as 'unchanged'.
func TestToastUnchanged(t *testing.T) {
	e := newEnv(t)
	big := `(SELECT string_agg(md5(random()::text || g::text), '') FROM generate_series(1, 3200) g)` // 102,400 bytes of hex
	e.exec(`CREATE TABLE docs (id int PRIMARY KEY, n int, body text, extra text)`,
		`ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL`,
		`ALTER TABLE docs ALTER COLUMN extra SET STORAGE EXTERNAL`,
		`CREATE TABLE full_docs (id int PRIMARY KEY, n int, body text)`,
		`ALTER TABLE full_docs ALTER COLUMN body SET STORAGE EXTERNAL`,
		`ALTER TABLE full_docs REPLICA IDENTITY FULL`,
		`INSERT INTO docs SELECT g, 0, `+big+`, `+big+` FROM generate_series(1, 5) g`,
		`INSERT INTO full_docs SELECT g, 0, `+big+` FROM generate_series(1, 3) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)

	// Unchanged values resolved from ClickHouse (rows of an earlier batch).
	e.exec(`UPDATE docs SET n = n + 1 WHERE id <= 3`, `UPDATE full_docs SET n = n + 1`)
	e.mustCatchUp(cfg)
	// Resolved from the same batch: a row inserted and then updated twice.
	e.exec(`BEGIN; INSERT INTO docs VALUES (10, 0, `+big+`, `+big+`); UPDATE docs SET n = 1 WHERE id = 10; UPDATE docs SET n = 2, extra = 'small' WHERE id = 10; COMMIT`,
		`UPDATE docs SET n = 7 WHERE id = 10`)
	e.mustCatchUp(cfg)
	e.verifyAll(cfg)
	sameRows(t, "docs bodies",
		e.chStrings("SELECT toString(id), toString(n), hex(MD5(body)), hex(MD5(extra)), toString(length(body)) FROM "+e.table("docs")+" FINAL WHERE _ferry_deleted = 0 ORDER BY id"),
		e.pgStrings("SELECT id, n, upper(md5(body)), upper(md5(extra)), length(body) FROM docs ORDER BY id"))
}

// TestNoReplicaIdentity checks that a table PostgreSQL could not publish
// updates for is left out (and its writes keep working), and that
// --append-only replicates such a table's inserts.
func TestNoReplicaIdentity(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE keyed (id int PRIMARY KEY, v text)`,
		`CREATE TABLE nokey (v text)`,
		`CREATE TABLE logs (at timestamptz, line text)`,
		`INSERT INTO keyed VALUES (1, 'a')`, `INSERT INTO nokey VALUES ('x')`,
		`INSERT INTO logs VALUES ('2024-01-01 00:00:00+00', 'same'), ('2024-01-01 00:00:00+00', 'same'), (NULL, 'other')`)
	cfg := e.config()
	cfg.AppendOnly = []string{"public.logs"}
	e.mustCatchUp(cfg)
	// Writes to the tables ferry cannot replicate in full still succeed.
	e.exec(`UPDATE nokey SET v = 'y'`, `DELETE FROM nokey`, `UPDATE logs SET line = 'edited' WHERE line = 'other'`,
		`INSERT INTO logs VALUES ('2024-01-02 00:00:00+00', 'later')`, `INSERT INTO keyed VALUES (2, 'b')`)
	e.mustCatchUp(cfg)
	counts := e.verifyAll(e.config())
	if _, ok := counts["public.nokey"]; ok {
		t.Error("a table without a replica identity was replicated")
	}
	if counts["public.keyed"] != 2 {
		t.Errorf("keyed: %d rows, want 2", counts["public.keyed"])
	}
	// logs holds every inserted row, duplicates included; the edit is not
	// replicated (append-only), so compare with what was inserted.
	got := e.chStrings("SELECT line FROM " + e.table("logs") + " FINAL ORDER BY line")
	sameRows(t, "logs", got, [][]string{{"later"}, {"other"}, {"same"}, {"same"}})
	var exists bool
	if err := e.pg.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = 'ferry' AND tablename = 'nokey')`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Error("nokey was added to the publication")
	}
}

// TestFullIdentityWithoutKey replicates a table that has REPLICA IDENTITY
// FULL and no key: rows are identified by all their columns.
func TestFullIdentityWithoutKey(t *testing.T) {
	e := newEnv(t)
	big := `(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 3200) g)`
	e.exec(`CREATE TABLE readings (sensor text, at timestamptz, value double precision, note text)`,
		`ALTER TABLE readings REPLICA IDENTITY FULL`,
		`ALTER TABLE readings ALTER COLUMN note SET STORAGE EXTERNAL`,
		`INSERT INTO readings SELECT 's' || (g % 5), '2024-01-01'::timestamptz + g * interval '1 minute', g, NULL FROM generate_series(1, 200) g`,
		`INSERT INTO readings VALUES (NULL, NULL, NULL, `+big+`)`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	e.exec(`UPDATE readings SET value = value * 2 WHERE sensor = 's1'`,
		`UPDATE readings SET note = 'checked' WHERE value < 20`,
		`DELETE FROM readings WHERE sensor = 's2'`,
		`UPDATE readings SET value = value WHERE sensor = 's3'`,       // changes nothing
		`UPDATE readings SET sensor = 'toasted' WHERE sensor IS NULL`, // note stays TOASTed and unchanged
		`INSERT INTO readings VALUES ('s9', NULL, 'NaN', 'new')`)
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.readings"]; n != 162 {
		t.Errorf("readings: %d rows, want 162", n)
	}
	sameRows(t, "toasted row", e.chStrings("SELECT sensor, toString(length(note)) FROM "+e.table("readings")+" FINAL WHERE _ferry_deleted = 0 AND sensor = 'toasted'"),
		[][]string{{"toasted", "102400"}})
}
