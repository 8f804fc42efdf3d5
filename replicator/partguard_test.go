package replicator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/schema"
)

// TestPartGuardSecondRootTruncate: the guard sees a partition's new file
// before the stream reaches the root TRUNCATE that made it, and a second
// root TRUNCATE gives the partition another file before the stream reaches
// the first. The stream then passes the position at which the guard first
// saw a change, with the partition's file still unexplained (the first
// TRUNCATE cannot claim a file the second made); the second TRUNCATE,
// still ahead in the stream, explains it. ferry must wait for it, not stop
// (the likeliest cause of a stop ferry torture saw once: seed 32386 round
// 30 on ClickHouse 18.16, "partition ... was truncated or rewritten"). The stream's
// positions are set by hand: the moment the guard checks falls between two
// commits only by chance in a live run. A TRUNCATE of one partition must
// still stop it.
func TestPartGuardSecondRootTruncate(t *testing.T) {
	ctx, url, conn := stackConn(t, 2*time.Minute)
	name := fmt.Sprintf("guard_%d", time.Now().UnixNano())
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`CREATE TABLE ` + name + ` (id int, region int, PRIMARY KEY (id, region)) PARTITION BY LIST (region)`)
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), `DROP TABLE IF EXISTS `+name) })
	exec(`CREATE TABLE ` + name + `_1 PARTITION OF ` + name + ` FOR VALUES IN (1)`)
	exec(`INSERT INTO ` + name + ` SELECT g, 1 FROM generate_series(1, 10) g`)
	// Published: the guard asks, before it stops, whether the table is.
	exec(`CREATE PUBLICATION ` + name + ` FOR TABLE ` + name + ` WITH (publish_via_partition_root = true)`)
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), `DROP PUBLICATION IF EXISTS `+name) })
	var oid int64
	if err := conn.QueryRow(ctx, `SELECT $1::regclass::oid::bigint`, name).Scan(&oid); err != nil {
		t.Fatal(err)
	}
	walNow := func() pglogrepl.LSN {
		t.Helper()
		var at pglogrepl.LSN
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(lsnScanner{&at}); err != nil {
			t.Fatal(err)
		}
		return at
	}
	truncate := func(table string) uint32 {
		t.Helper()
		var xid int64
		exec(`BEGIN`)
		exec(`TRUNCATE ` + table)
		if err := conn.QueryRow(ctx, `SELECT txid_current() % 4294967296`).Scan(&xid); err != nil {
			t.Fatal(err)
		}
		exec(`COMMIT`)
		return uint32(xid)
	}

	rel := &relation{ref: tableRef{OID: uint32(oid), Schema: "public", Name: name}, tm: &schema.TableMap{Name: name}}
	rel.doc.Kind = "p"
	if err := refreshLeaves(ctx, conn, rel); err != nil {
		t.Fatal(err)
	}
	s := &stream{rep: &Replicator{log: zap.NewNop(), cfg: Config{Publication: name}}, cfg: Config{ConnString: url, Publication: name}, log: zap.NewNop(),
		byOID: map[uint32]*relation{rel.ref.OID: rel}}
	member, err := s.rep.memberships(ctx, conn, []uint32{rel.ref.OID})
	if err != nil || len(member[rel.ref.OID]) == 0 {
		t.Fatalf("memberships: %v %v", member, err)
	}
	rel.member = member[rel.ref.OID]
	defer func() {
		if s.sql != nil {
			s.sql.Close(context.Background())
		}
	}()
	start := walNow()
	s.guard = &partGuard{watching: true, cleanUpTo: start}
	check := func(at pglogrepl.LSN) error {
		t.Helper()
		s.lastEnd = at
		return s.checkPartitions(ctx, true)
	}

	first := truncate(name)
	if err := check(start + 1); err != nil { // the stream is before the first TRUNCATE
		t.Fatalf("first check: %v", err)
	}
	if len(s.guard.pending) != 1 {
		t.Fatalf("the guard did not see the partition's new file: pending %v", s.guard.pending)
	}
	var seenAt pglogrepl.LSN
	for _, c := range s.guard.pending {
		seenAt = c.seenAt
	}
	second := truncate(name)
	// The stream applies the first TRUNCATE: the file is the second's.
	if err := s.truncatedLeaves(ctx, rel, first); err != nil {
		t.Fatal(err)
	}
	if err := check(seenAt); err != nil {
		t.Fatalf("the stream passed the first root TRUNCATE, the second one is still ahead: %v", err)
	}
	if s.guard.cleanUpTo >= seenAt {
		t.Fatalf("the guard lets the stream confirm %s with a partition's file unexplained", s.guard.cleanUpTo)
	}
	if err := s.truncatedLeaves(ctx, rel, second); err != nil {
		t.Fatal(err)
	}
	end := walNow()
	if err := check(end); err != nil {
		t.Fatalf("after the second root TRUNCATE: %v", err)
	}
	if len(s.guard.pending) != 0 || s.guard.cleanUpTo != end {
		t.Fatalf("after both root TRUNCATEs: pending %v, confirmable up to %s, want none and %s", s.guard.pending, s.guard.cleanUpTo, end)
	}

	// A TRUNCATE of the partition itself is published by nothing.
	truncate(name + "_1")
	if err := check(end + 1); err != nil {
		t.Fatalf("first check after the partition's TRUNCATE: %v", err)
	}
	err = check(walNow())
	if err == nil || !strings.Contains(err.Error(), name+"_1") {
		t.Fatalf("a TRUNCATE of the partition alone: %v, want an error naming public.%s_1", err, name)
	}
}
