package replicator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
	"github.com/ferry-cdc/ferry/replicator"
)

// leastPrivilegeSQL is docs/SECURITY.md's least-privilege role: what a superuser runs
// so that ferry needs none. {role}, {db} and {tables} are filled in (and
// the stack asks no password). Keep the two the same.
var leastPrivilegeSQL = []string{
	`CREATE ROLE {role} LOGIN REPLICATION`,
	`GRANT CONNECT ON DATABASE {db} TO {role}`,
	`GRANT USAGE ON SCHEMA public TO {role}`,
	`GRANT SELECT ON {tables} TO {role}`,
	`CREATE PUBLICATION ferry FOR TABLE {tables} WITH (publish_via_partition_root = true)`,
	`ALTER PUBLICATION ferry OWNER TO {role}`,
}

// TestLeastPrivilegeRole sets up the role exactly as docs/SECURITY.md documents it
// (an administrator owns the tables and creates the publication) and runs
// ferry as that role: the initial copy, the stream with heartbeats, a
// schema change, and ferry check and verify.
func TestLeastPrivilegeRole(t *testing.T) {
	e := newEnv(t)
	role := "ferry_lp_" + e.db[len(e.db)-8:]
	e.exec(`CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL)`,
		`CREATE TABLE orders (id bigint PRIMARY KEY, customer int REFERENCES customers, amount numeric(10,2), placed timestamptz DEFAULT now())`,
		`INSERT INTO customers SELECT g, 'c' || g FROM generate_series(1, 100) g`,
		`INSERT INTO orders SELECT g, 1 + g % 100, g / 7.0 FROM generate_series(1, 5000) g`)
	r := strings.NewReplacer("{role}", role, "{db}", e.db, "{tables}", "public.customers, public.orders")
	for _, s := range leastPrivilegeSQL {
		e.adminExec(r.Replace(s))
	}
	t.Cleanup(func() { dropRole(e, role) })
	cfg := e.config()
	cfg.ConnString = asRole(t, e.pgURL, role)
	cfg.Heartbeat = 200 * time.Millisecond
	cfg.StandbyInterval = 500 * time.Millisecond

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	checkPasses(t, cfg)
	e.mustCatchUp(cfg)
	stop := e.streamInBackground(cfg)
	e.exec(`UPDATE orders SET amount = amount + 1 WHERE id % 10 = 0`, `DELETE FROM orders WHERE id > 4900`,
		`INSERT INTO customers VALUES (101, 'late')`,
		`ALTER TABLE orders ADD COLUMN note text`,
		`INSERT INTO orders (id, customer, amount, note) VALUES (9001, 101, 5, 'after the change')`,
		`UPDATE orders SET note = 'noted' WHERE id <= 10`)
	end := e.pgStrings(`SELECT pg_current_wal_lsn()::text`)[0][0]
	testkit.WaitFor(t, 3*time.Minute, "ferry to confirm the changes", func() bool {
		got := e.pgStrings(`SELECT (s.confirmed_flush_lsn >= '` + end + `')::text, a.usename::text FROM pg_replication_slots s
			JOIN pg_stat_activity a ON a.pid = s.active_pid WHERE s.slot_name = '` + e.slot + `'`)
		if len(got) == 1 && got[0][1] != role {
			t.Fatalf("the slot is streamed by %s, not %s", got[0][1], role)
		}
		return len(got) == 1 && got[0][0] == "true"
	})
	stop()
	counts := e.verifyAll(cfg)
	if counts["public.orders"] != 4901 || counts["public.customers"] != 101 {
		t.Errorf("rows: %v, want 4901 orders and 101 customers", counts)
	}
	note := e.chStrings(`SELECT ifNull(note, '') FROM ` + e.table("orders") + ` FINAL WHERE id = 9001`)
	if len(note) != 1 || note[0][0] != "after the change" {
		t.Errorf("the column added while streaming: %v", note)
	}
	// The role removes what ferry made: its slot and the publication.
	steps, err := replicator.Teardown(ctx, cfg, replicator.TeardownOptions{})
	if err != nil {
		t.Fatalf("teardown as %s: %v (done: %v)", role, err, steps)
	}
	if left := e.pgStrings(`SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = '` + e.slot + `') + (SELECT count(*) FROM pg_publication)`); left[0][0] != "0" {
		t.Errorf("after teardown as %s (%v): %s slots and publications left", role, steps, left[0][0])
	}
	if super := e.pgStrings(`SELECT rolsuper::text FROM pg_roles WHERE rolname = '` + role + `'`); super[0][0] != "false" {
		t.Fatalf("%s is a superuser", role)
	}
}
