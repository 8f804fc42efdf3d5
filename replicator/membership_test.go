package replicator_test

import (
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// TestPublicationDropAndReadd: a table dropped from the publication and
// added back lacks, in the stream, every change made while it was out.
// ferry must copy it afresh, whether it ran through the gap (and no row of
// the table changed after it came back, so that no Relation message tells)
// or was stopped; before, those changes were missing from ClickHouse for
// good while the slot was confirmed past them.
func TestPublicationDropAndReadd(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY, v text)`, `CREATE TABLE b (id int PRIMARY KEY, v text)`,
		`INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 100) g`,
		`INSERT INTO b SELECT g, 'b' || g FROM generate_series(1, 100) g`)
	cfg := e.config()
	cfg.Tables = []string{"public.a", "public.b"}
	e.mustCatchUp(cfg)
	cfg.Tables = nil // the publication's tables from here on

	// While ferry runs.
	stop := e.streamInBackground(cfg)
	e.exec(`ALTER PUBLICATION ferry DROP TABLE b`,
		`UPDATE b SET v = 'while out' WHERE id <= 10`, `DELETE FROM b WHERE id > 90`, `INSERT INTO b VALUES (1000, 'new while out')`,
		`ALTER PUBLICATION ferry ADD TABLE b`,
		`UPDATE a SET v = 'after' WHERE id <= 5`)
	// No change of b follows: only the catalog tells that it came back.
	testkit.WaitFor(t, 2*time.Minute, "ferry to copy b afresh", func() bool {
		return len(e.chStrings("SELECT 'found' FROM "+e.table("b")+" FINAL WHERE id = 1000 AND _ferry_deleted = 0")) == 1
	})
	stop()
	counts := e.verifyAll(cfg)
	if counts["public.a"] != 100 || counts["public.b"] != 91 {
		t.Errorf("verified %v, want public.a 100 rows and public.b 91", counts)
	}

	// While ferry is stopped.
	e.exec(`ALTER PUBLICATION ferry DROP TABLE b`,
		`UPDATE b SET v = 'out again' WHERE id BETWEEN 11 AND 20`, `DELETE FROM b WHERE id <= 5`,
		`ALTER PUBLICATION ferry ADD TABLE b`,
		`UPDATE b SET v = 'back' WHERE id = 50`)
	e.mustCatchUp(cfg)
	counts = e.verifyAll(cfg)
	if counts["public.a"] != 100 || counts["public.b"] != 86 {
		t.Errorf("verified %v, want public.a 100 rows and public.b 86", counts)
	}
	// The state stored with the copy is the table's membership now.
	e.exec(`UPDATE b SET v = 'later' WHERE id = 60`)
	e.mustCatchUp(cfg)
	e.verifyAll(cfg)
}
