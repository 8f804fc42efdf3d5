package replicator

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/schema"
)

// A partitioned table is published through its root
// (publish_via_partition_root), and then PostgreSQL publishes nothing when
// one partition is truncated, detached or dropped, nor the rows of a table
// attached as a partition: pgoutput names a partition's truncate only when
// the partition is published as itself, and a second publication of the
// leaves does not change that (the root's publication decides whose name a
// leaf's changes carry, and a leaf not published as itself is skipped).
// ClickHouse cannot be told which of its rows were that partition's, so
// ferry cannot replicate these exactly. It watches instead: it keeps each
// leaf's relfilenode (which TRUNCATE, VACUUM FULL and CLUSTER change) with
// the table's state, compares it with the catalog before it confirms a
// position, and stops when a change stays unexplained by the stream: a
// TRUNCATE of the root, or a captured DDL that rebuilt the table. An
// append-only table is not watched for rewrites: it replicates no TRUNCATE
// or DELETE, so a partition emptied or rewritten changes nothing for it.

// leafState is one leaf partition as ferry last knew it.
type leafState struct {
	OID  uint32 `json:"oid"`
	Node uint32 `json:"node"` // pg_class.relfilenode
	Name string `json:"name"` // schema.name, for messages
}

// leavesJSON is the leaves of the partitioned table c, for tableJSON; null
// for a plain table.
const leavesJSON = `CASE WHEN c.relkind = 'p' THEN coalesce((SELECT jsonb_agg(jsonb_build_object('oid', lc.oid::bigint, 'node', lc.relfilenode::bigint,
		'name', format('%I.%I', ln.nspname, lc.relname)) ORDER BY lc.oid)
		FROM pg_partition_tree(c.oid) p JOIN pg_class lc ON lc.oid = p.relid JOIN pg_namespace ln ON ln.oid = lc.relnamespace WHERE p.isleaf), '[]'::jsonb) END`

// leafNow is a leaf as the catalog shows it now.
type leafNow struct {
	leafState
	xmin uint32 // of its pg_class row: the transaction that last changed it
	cmin uint32 // and the command of that transaction
}

// partGuard holds back confirmations until the partitions of every
// replicated partitioned table are as ferry knows them.
type partGuard struct {
	watching  bool          // a partitioned table is replicated
	cleanUpTo pglogrepl.LSN // while watching, the stream may confirm up to here
	lastCheck time.Time
	pending   map[string]partChange // unexplained changes, by partChange.key
}

// partChange is a leaf whose catalog state ferry's state does not explain,
// seen when PostgreSQL's WAL ended at seenAt: once the stream has passed
// seenAt, everything that could explain it has been applied. The leaf's
// file is part of what was seen: a leaf rewritten again since is a new
// change, which something later in the stream may explain (a second
// TRUNCATE of the root, committed before the stream applied the first).
type partChange struct {
	root   *relation
	leaf   string
	node   uint32 // the leaf's relfilenode when seen; 0 when it is gone
	what   string
	seenAt pglogrepl.LSN
}

func (c partChange) key() string {
	return fmt.Sprintf("%d/%s/%d/%s", c.root.ref.OID, c.leaf, c.node, c.what)
}

// confirmable caps what the stream may confirm.
func (g *partGuard) confirmable(lastEnd pglogrepl.LSN) pglogrepl.LSN {
	if g == nil || !g.watching {
		return lastEnd
	}
	return min(lastEnd, g.cleanUpTo)
}

// partitioned lists the replicated partitioned tables.
func (s *stream) partitioned() []*relation {
	var rels []*relation
	for _, rel := range s.byOID {
		if rel.doc.Kind == "p" {
			rels = append(rels, rel)
		}
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i].ref.OID < rels[j].ref.OID })
	return rels
}

// checkPartitions compares the partitions with what ferry knows, at most
// once a second unless force, and moves cleanUpTo to what the stream had
// received before the check when nothing is unexplained.
func (s *stream) checkPartitions(ctx context.Context, force bool) error {
	g := s.guard
	rels := s.partitioned()
	if len(rels) == 0 {
		g.watching = false
		return nil
	}
	if !g.watching { // a partitioned table joined: its copy holds what came before
		g.watching, g.cleanUpTo, force = true, s.acked, true
	}
	if s.lastEnd <= g.cleanUpTo || (!force && time.Since(g.lastCheck) < time.Second) {
		return nil
	}
	g.lastCheck = time.Now()
	upTo := s.lastEnd
	conn, err := s.pg(ctx)
	if err != nil {
		return err
	}
	var changes []partChange
	for _, rel := range rels {
		found, err := s.partitionChanges(ctx, conn, rel)
		if err != nil {
			return err
		}
		changes = append(changes, found...)
	}
	var walEnd pglogrepl.LSN
	if len(changes) > 0 {
		// Read after the catalog: every change seen committed before it.
		if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(lsnScanner{&walEnd}); err != nil {
			return fmt.Errorf("read current WAL position: %w", err)
		}
	}
	pending := map[string]partChange{}
	for _, c := range changes {
		if old, ok := g.pending[c.key()]; ok {
			if upTo >= old.seenAt {
				out, err := s.outOfPublication(ctx, conn, old.root.ref.OID)
				if err != nil {
					return err
				}
				if !out {
					return s.partitionError(old)
				}
				continue
			}
			c.seenAt = old.seenAt
		} else {
			c.seenAt = walEnd
			s.log.Info("a partition changed outside the stream; waiting for the stream to explain it", zap.Stringer("table", c.root.ref),
				zap.String("partition", c.leaf), zap.String("change", c.what), zap.Stringer("wal_end", walEnd))
		}
		pending[c.key()] = c
	}
	g.pending = pending
	if len(pending) == 0 {
		g.cleanUpTo = upTo
	}
	return nil
}

// outOfPublication reads the publications' catalog rows again (see
// membership.go) and reports whether the table is out of them, or came
// back and waits for its copy. Either way a change of its partitions is not
// the stream's to explain: PostgreSQL sends nothing of a table while it is
// out (a root TRUNCATE then rewrites every partition unseen), and the copy
// made at its return reads the table, and its partitions, afresh. The
// partitions it has now become its baseline.
func (s *stream) outOfPublication(ctx context.Context, conn *pgx.Conn, oid uint32) (bool, error) {
	if err := s.checkMembership(ctx, true); err != nil {
		return false, err
	}
	rel := s.byOID[oid]
	if rel == nil {
		return true, nil
	}
	if rel.recopy == "" {
		now, err := s.rep.memberships(ctx, conn, []uint32{oid})
		if err != nil {
			return false, err
		}
		if len(now[oid]) > 0 {
			return false, nil // published all along, or back and seen as such by nothing yet: stop
		}
	}
	s.log.Info("a partition changed while its table was out of the publication: the copy made when the table is back reads it afresh",
		zap.Stringer("table", rel.ref), zap.Bool("back", rel.recopy != ""))
	if err := refreshLeaves(ctx, conn, rel); err != nil {
		return false, err
	}
	return true, s.rep.saveState(ctx, rel)
}

// partitionChanges compares one table's leaves with its baseline. A new
// leaf without rows older than the transaction that made it a partition
// (CREATE TABLE ... PARTITION OF, then inserts, which are published) joins
// the baseline.
func (s *stream) partitionChanges(ctx context.Context, conn *pgx.Conn, rel *relation) ([]partChange, error) {
	now, err := readLeaves(ctx, conn, rel.ref.OID)
	if err != nil {
		return nil, err
	}
	known := map[uint32]leafState{}
	for _, l := range rel.doc.Leaves {
		known[l.OID] = l
	}
	var changes []partChange
	save := false
	for _, l := range now {
		k, ok := known[l.OID]
		delete(known, l.OID)
		switch {
		case ok && k.Node != l.Node && rel.ref.AppendOnly:
			// An insert-only table replicates no TRUNCATE or DELETE: a
			// rewritten partition changes nothing ClickHouse should hold.
			for i := range rel.doc.Leaves {
				if rel.doc.Leaves[i].OID == l.OID {
					rel.doc.Leaves[i].Node = l.Node
				}
			}
			save = true
		case ok && k.Node != l.Node:
			changes = append(changes, partChange{root: rel, leaf: l.Name, node: l.Node, what: "truncated or rewritten"})
		case !ok:
			older, err := rowsOlderThan(ctx, conn, rel.ref, l)
			if err != nil {
				return nil, err
			}
			if older {
				changes = append(changes, partChange{root: rel, leaf: l.Name, node: l.Node, what: "attached with rows of its own"})
				continue
			}
			rel.doc.Leaves = append(rel.doc.Leaves, l.leafState)
			save = true
		}
	}
	for _, l := range known {
		changes = append(changes, partChange{root: rel, leaf: l.Name, what: "detached or dropped"})
	}
	if save {
		sort.Slice(rel.doc.Leaves, func(i, j int) bool { return rel.doc.Leaves[i].OID < rel.doc.Leaves[j].OID })
		if err := s.rep.saveState(ctx, rel); err != nil {
			return nil, err
		}
	}
	return changes, nil
}

// readLeaves reads a partitioned table's leaves from the catalog.
func readLeaves(ctx context.Context, conn *pgx.Conn, root uint32) ([]leafNow, error) {
	rows, err := conn.Query(ctx, `SELECT c.oid::bigint, c.relfilenode::bigint, format('%I.%I', n.nspname, c.relname),
		c.xmin::text::bigint, c.cmin::text::bigint
		FROM pg_partition_tree($1::oid) p JOIN pg_class c ON c.oid = p.relid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE p.isleaf ORDER BY 1`, int64(root))
	if err != nil {
		return nil, fmt.Errorf("read the partitions of table %d: %w", root, err)
	}
	var out []leafNow
	for rows.Next() {
		var oid, node, xmin, cmin int64
		var l leafNow
		if err := rows.Scan(&oid, &node, &l.Name, &xmin, &cmin); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the partitions of table %d: %w", root, err)
		}
		l.OID, l.Node, l.xmin, l.cmin = uint32(oid), uint32(node), uint32(xmin), uint32(cmin)
		out = append(out, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the partitions of table %d: %w", root, err)
	}
	return out, nil
}

// rowsOlderThan reports whether a new leaf holds a row written before it
// became a partition (the last change of its pg_class row): rows
// PostgreSQL did not publish through the root. A row of an older
// transaction is, and so is one its own transaction wrote in an earlier
// command (CREATE TABLE, INSERT, ATTACH PARTITION in one transaction).
// Read through the root, on which ferry has SELECT.
func rowsOlderThan(ctx context.Context, conn *pgx.Conn, root tableRef, l leafNow) (bool, error) {
	var older bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+root.quoted()+` WHERE tableoid = $1::oid
		AND CASE WHEN xmin::text::bigint = $2 THEN cmin::text::bigint < $3 ELSE age(xmin) > age($2::text::xid) END)`,
		int64(l.OID), int64(l.xmin), int64(l.cmin)).Scan(&older)
	if err != nil {
		return false, fmt.Errorf("look at the rows of new partition %s of %s: %w", l.Name, root, err)
	}
	return older, nil
}

// truncatedLeaves takes the leaves a TRUNCATE of the root rewrote in
// transaction xid into the baseline; a leaf changed again after it keeps
// its old state, so that change is still seen.
func (s *stream) truncatedLeaves(ctx context.Context, rel *relation, xid uint32) error {
	if rel.doc.Kind != "p" || s.guard == nil {
		return nil
	}
	conn, err := s.pg(ctx)
	if err != nil {
		return err
	}
	now, err := readLeaves(ctx, conn, rel.ref.OID)
	if err != nil {
		return err
	}
	for _, l := range now {
		for i := range rel.doc.Leaves {
			k := &rel.doc.Leaves[i]
			if k.OID != l.OID || k.Node == l.Node {
				continue
			}
			rewrote := l.xmin == xid
			if !rewrote {
				if rewrote, err = rewroteIn(ctx, conn, l, xid); err != nil {
					return err
				}
			}
			if rewrote {
				k.Node = l.Node
			}
		}
	}
	return s.rep.saveState(ctx, rel)
}

// rewroteIn reports whether transaction xid gave leaf l its file, when a
// later statement (an ALTER TABLE ... ADD COLUMN of the root, say) has
// replaced the leaf's catalog row and its xmin with it: TRUNCATE gives the
// leaf's indexes and TOAST table new files too, and so does every later
// rewrite of the leaf (TRUNCATE, VACUUM FULL, CLUSTER, a rewriting ALTER
// TABLE), while statements that only change the leaf's own row leave
// theirs alone. So one of them still last changed by xid means nothing
// rewrote the leaf since. (ALTER TABLE ... SET TABLESPACE moves the heap
// alone, but it moves the rows with it.) A leaf with neither index nor
// TOAST table gives no such evidence and stays unexplained.
func rewroteIn(ctx context.Context, conn *pgx.Conn, l leafNow, xid uint32) (bool, error) {
	var rewrote bool
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_class r WHERE r.xmin::text::bigint = $2
		AND (r.oid = (SELECT reltoastrelid FROM pg_class WHERE oid = $1::oid)
			OR r.oid IN (SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = $1::oid
				OR i.indrelid = (SELECT reltoastrelid FROM pg_class WHERE oid = $1::oid))))`,
		int64(l.OID), int64(xid)).Scan(&rewrote)
	if err != nil {
		return false, fmt.Errorf("look at the indexes of partition %s: %w", l.Name, err)
	}
	return rewrote, nil
}

// refreshLeaves reads a table's leaves: before a copy of it, and again in
// the copy's own snapshot (copyFresh), which is what the stream goes on
// from: whatever changes later is either in the copy or seen afterwards.
// (Read only before the snapshot, a root TRUNCATE committed in between
// was in the copy, left out of the stream, and never explained.)
func refreshLeaves(ctx context.Context, conn *pgx.Conn, rel *relation) error {
	if rel.doc.Kind != "p" {
		return nil
	}
	now, err := readLeaves(ctx, conn, rel.ref.OID)
	if err != nil {
		return err
	}
	rel.doc.Leaves = make([]leafState, len(now))
	for i, l := range now {
		rel.doc.Leaves[i] = l.leafState
	}
	return nil
}

// partitionError stops ferry on a partition change it cannot replicate.
func (s *stream) partitionError(c partChange) error {
	table := schema.QuoteCH(c.root.tm.Name)
	if db, ok := s.sink.(interface{ Database() string }); ok {
		table = schema.QuoteCH(db.Database()) + "." + table
	}
	return fmt.Errorf("partition %s of %s was %s, which PostgreSQL does not publish for a table published through its root: "+
		"ClickHouse table %s may no longer hold what PostgreSQL holds, so ferry stops rather than confirm past it "+
		"(a VACUUM FULL or CLUSTER of the partition looks the same to ferry, and so does a TRUNCATE of the root inside a SAVEPOINT). "+
		"Resync the table: run DROP TABLE %s in ClickHouse and start ferry again, which copies it anew. "+
		"To empty one partition replicably, DELETE FROM it, or TRUNCATE %s (the whole table, outside a savepoint); "+
		"with ferry setup's DDL capture, ATTACH and DETACH PARTITION are replicated",
		c.leaf, c.root.ref, c.what, table, table, c.root.ref)
}

// startGuard watches the partitioned tables from the stream's start. A
// table whose state predates this watch (no leaves stored) starts from the
// catalog as it is now.
func (s *stream) startGuard(ctx context.Context, start pglogrepl.LSN) error {
	s.guard = &partGuard{cleanUpTo: start}
	rels := s.partitioned()
	s.guard.watching = len(rels) > 0
	for _, rel := range rels {
		if rel.doc.Leaves != nil {
			continue
		}
		conn, err := s.pg(ctx)
		if err != nil {
			return err
		}
		if err := refreshLeaves(ctx, conn, rel); err != nil {
			return err
		}
		s.log.Info("watching the partitions of a table from now on", zap.Stringer("table", rel.ref), zap.Int("partitions", len(rel.doc.Leaves)))
		if err := s.rep.saveState(ctx, rel); err != nil {
			return err
		}
	}
	return nil
}

// partitionDropped rebuilds the table a captured DROP TABLE removed a leaf
// partition of (PostgreSQL publishes nothing for it): its partitions, read
// now, differ from those ferry knows, which makes evolve copy it anew.
func (s *stream) partitionDropped(ctx context.Context, leaf uint32, version uint64) error {
	for _, rel := range s.partitioned() {
		for _, l := range rel.doc.Leaves {
			if l.OID != leaf {
				continue
			}
			conn, err := s.pg(ctx)
			if err != nil {
				return err
			}
			d, err := describeTable(ctx, conn, rel.ref)
			if err != nil {
				return err
			}
			s.log.Info("a partition was dropped: rebuilding its table", zap.Stringer("table", rel.ref), zap.String("partition", l.Name))
			return s.evolve(ctx, rel, d, true, version)
		}
	}
	return nil
}
