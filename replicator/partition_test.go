package replicator_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ferry-cdc/ferry/replicator"
)

// TestPartitionChangesWithoutCapture: without ferry setup, PostgreSQL
// publishes no TRUNCATE, DETACH or DROP of one partition of a table
// published through its root. ferry must stop with an error that names the
// partition and the fix rather than keep the partition's rows in ClickHouse,
// and must go on through what PostgreSQL does publish: a TRUNCATE of the
// root, a new partition filled by inserts.
func TestPartitionChangesWithoutCapture(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE m (id int, region int, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region)`,
		`CREATE TABLE m1 PARTITION OF m FOR VALUES IN (1)`, `CREATE TABLE m2 PARTITION OF m FOR VALUES IN (2)`,
		`INSERT INTO m SELECT g, 1 + g % 2, 'v' || g FROM generate_series(1, 400) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)

	e.exec(`TRUNCATE m`, `INSERT INTO m SELECT g, 1 + g % 2, 'w' || g FROM generate_series(1, 300) g`,
		`CREATE TABLE m3 PARTITION OF m FOR VALUES IN (3)`, `INSERT INTO m SELECT g, 3, 'new' FROM generate_series(1, 50) g`,
		`BEGIN; CREATE TABLE m6 PARTITION OF m FOR VALUES IN (6); INSERT INTO m SELECT g, 6, 'same tx' FROM generate_series(1, 20) g; COMMIT`)
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.m"]; n != 370 {
		t.Fatalf("after a root TRUNCATE and new partitions: %d rows, want 370", n)
	}

	resync := func() {
		t.Helper()
		if err := e.ch.Exec(context.Background(), "DROP TABLE "+e.table("m")); err != nil {
			t.Fatal(err)
		}
		e.mustCatchUp(cfg)
	}
	for _, c := range []struct{ before, change, partition string }{
		{``, `TRUNCATE m1`, "public.m1"},
		{``, `ALTER TABLE m DETACH PARTITION m2`, "public.m2"},
		{``, `DROP TABLE m3`, "public.m3"},
		{`CREATE TABLE m4 (LIKE m); INSERT INTO m4 SELECT g, 4, 'own' FROM generate_series(1, 5) g`,
			`ALTER TABLE m ATTACH PARTITION m4 FOR VALUES IN (4)`, "public.m4"},
		{``, `BEGIN; CREATE TABLE m5 (LIKE m); INSERT INTO m5 SELECT g, 5, 'own' FROM generate_series(1, 5) g;
			ALTER TABLE m ATTACH PARTITION m5 FOR VALUES IN (5); COMMIT`, "public.m5"},
	} {
		if c.before != "" {
			e.exec(c.before)
		}
		e.exec(c.change)
		err := e.catchUp(cfg)
		if err == nil {
			pg := e.pgStrings(`SELECT count(*) FROM m`)[0][0]
			ch := e.chStrings(`SELECT toString(count()) FROM ` + e.table("m") + ` FINAL WHERE _ferry_deleted = 0`)[0][0]
			t.Fatalf("%s: ferry went on without an error; PostgreSQL holds %s rows of m, ClickHouse %s", c.change, pg, ch)
		}
		for _, want := range []string{c.partition, "public.m", "DROP TABLE"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error does not name %q: %v", c.change, want, err)
			}
		}
		t.Logf("%s: %v", c.change, err)
		// Stopped again at once: the change is not forgotten by a restart.
		if err := e.catchUp(cfg); err == nil {
			t.Fatalf("%s: a restart went on without an error", c.change)
		}
		resync()
		e.verifyAll(cfg)
	}
	e.exec(`INSERT INTO m SELECT g, 1, 'after' FROM generate_series(1, 10) g`)
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.m"]; n != 40 {
		t.Errorf("at the end: %d rows, want 40", n)
	}
}

// TestPartitionChangesWithCapture: with ferry setup, DETACH and DROP of a
// partition reach ferry as DDL and the table is rebuilt; a TRUNCATE of a
// partition, which fires no event trigger, still stops ferry.
func TestPartitionChangesWithCapture(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE m (id int, region int, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region)`,
		`CREATE TABLE m1 PARTITION OF m FOR VALUES IN (1)`, `CREATE TABLE m2 PARTITION OF m FOR VALUES IN (2)`,
		`CREATE TABLE m3 PARTITION OF m FOR VALUES IN (3)`,
		`INSERT INTO m SELECT g, 1 + g % 3, 'v' || g FROM generate_series(1, 300) g`)
	if err := replicator.Setup(context.Background(), e.adminURL, "ferry"); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	e.mustCatchUp(cfg)
	e.exec(`DROP TABLE m3`)
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.m"]; n != 200 {
		t.Errorf("after DROP TABLE m3: %d rows, want 200", n)
	}
	e.exec(`ALTER TABLE m DETACH PARTITION m2`, `INSERT INTO m VALUES (1000, 1, 'after')`)
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.m"]; n != 101 {
		t.Errorf("after DETACH PARTITION m2: %d rows, want 101", n)
	}
	e.exec(`TRUNCATE m1`)
	if err := e.catchUp(cfg); err == nil || !strings.Contains(err.Error(), "public.m1") {
		t.Errorf("TRUNCATE of a partition with capture: %v, want an error naming public.m1", err)
	}
}

// TestPartitionRootTruncateThenAlter: a TRUNCATE of the root that ferry
// reads only after a later ALTER TABLE of the root has replaced the
// partitions' catalog rows (ferry behind, or stopped) is still a TRUNCATE
// of the root, which ferry replicates: it must go on, not stop on the
// partitions' new files (ferry torture, seed 771526 rounds 6 and 21). A
// TRUNCATE of one partition between the two must still stop it.
func TestPartitionRootTruncateThenAlter(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE m (id int, region int, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region)`,
		`CREATE TABLE m1 PARTITION OF m FOR VALUES IN (1)`, `CREATE TABLE m2 PARTITION OF m FOR VALUES IN (2)`,
		// No text column: a leaf whose only evidence is its index.
		`CREATE TABLE n (id int PRIMARY KEY, k int) PARTITION BY RANGE (id)`,
		`CREATE TABLE n1 PARTITION OF n FOR VALUES FROM (0) TO (1000)`, `CREATE TABLE n2 PARTITION OF n FOR VALUES FROM (1000) TO (2000)`,
		`INSERT INTO m SELECT g, 1 + g % 2, 'v' || g FROM generate_series(1, 400) g`,
		`INSERT INTO n SELECT g, g FROM generate_series(1, 1999) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)

	// Statements that change the partitions' catalog rows but not the
	// table's columns (so no rebuild explains the new files).
	e.exec(`TRUNCATE m`, `INSERT INTO m SELECT g, 1 + g % 2, 'w' || g FROM generate_series(1, 300) g`,
		`ALTER TABLE m ADD CONSTRAINT m_positive CHECK (id > 0)`, `INSERT INTO m SELECT g, 1 + g % 2, 'x' FROM generate_series(301, 320) g`,
		`BEGIN; TRUNCATE n; INSERT INTO n SELECT g, -g FROM generate_series(1, 1500) g; COMMIT`,
		`ALTER TABLE n1 SET (fillfactor = 90)`, `ALTER TABLE n2 SET (autovacuum_enabled = off)`)
	e.mustCatchUp(cfg)
	counts := e.verifyAll(cfg)
	if counts["public.m"] != 320 || counts["public.n"] != 1500 {
		t.Fatalf("after root TRUNCATEs and later ALTERs: %v, want public.m 320 and public.n 1500", counts)
	}
	// A column change after the TRUNCATE, and a restart in between.
	e.exec(`TRUNCATE m`, `INSERT INTO m SELECT g, 1, 'y' FROM generate_series(1, 30) g`, `ALTER TABLE m ADD COLUMN extra int`,
		`INSERT INTO m VALUES (31, 1, 'z', 31)`)
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.m"]; n != 31 {
		t.Fatalf("after a second root TRUNCATE and an ADD COLUMN: %d rows of public.m, want 31", n)
	}

	// A TRUNCATE of one partition after the root's, hidden behind the same
	// kind of ALTER, is a change PostgreSQL did not publish.
	e.exec(`TRUNCATE m`, `INSERT INTO m SELECT g, 1 + g % 2, 'z' FROM generate_series(1, 100) g`,
		`TRUNCATE m2`, `ALTER TABLE m ADD COLUMN later int`)
	err := e.catchUp(cfg)
	if err == nil || !strings.Contains(err.Error(), "public.m2") {
		t.Fatalf("a TRUNCATE of partition m2 after one of the root: %v, want an error naming public.m2", err)
	}
	if strings.Contains(err.Error(), "public.m1") {
		t.Errorf("the error names partition m1, which only the root's TRUNCATE emptied: %v", err)
	}
}

// TestPartitionAppendOnlyTruncate: an append-only table replicates inserts
// only, so a TRUNCATE of it or of one of its partitions changes nothing
// ClickHouse should hold: ferry goes on, keeping every row it was sent.
func TestPartitionAppendOnlyTruncate(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE ev (n int, v text) PARTITION BY LIST (n)`,
		`CREATE TABLE ev1 PARTITION OF ev FOR VALUES IN (1)`, `CREATE TABLE ev2 PARTITION OF ev FOR VALUES IN (2)`,
		`INSERT INTO ev SELECT 1 + g % 2, 'a' || g FROM generate_series(1, 100) g`)
	cfg := e.config()
	cfg.AppendOnly = []string{"public.ev"}
	e.mustCatchUp(cfg)
	e.exec(`TRUNCATE ev2`, `INSERT INTO ev SELECT 1 + g % 2, 'b' || g FROM generate_series(1, 10) g`,
		`TRUNCATE ev`, `INSERT INTO ev SELECT 2, 'c' || g FROM generate_series(1, 5) g`, `VACUUM FULL ev1`)
	e.mustCatchUp(cfg)
	if n := e.chFinal("ev"); n != 115 {
		t.Fatalf("append-only ev after partition and root TRUNCATEs: %d rows in ClickHouse, want all 115 ever inserted", n)
	}
	e.exec(`INSERT INTO ev VALUES (1, 'after')`)
	e.mustCatchUp(cfg)
	if n := e.chFinal("ev"); n != 116 {
		t.Fatalf("append-only ev after one more insert: %d rows in ClickHouse, want 116", n)
	}
}
