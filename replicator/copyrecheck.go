package replicator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// The initial copy reads every table under the slot's exported snapshot,
// which is taken before the copy locks the tables, one after the other. A
// schema change that commits in between is invisible to the snapshot's
// catalog but not to the COPY, which reads the table as it is now:
//   - a rewriting ALTER TABLE (a type change, a column added with a
//     volatile default, SET ACCESS METHOD) or a TRUNCATE gives the table a
//     new file whose rows are all stamped with the newer transaction, so the
//     old snapshot sees it empty (PostgreSQL documents both as not
//     MVCC-safe): the copy would read no row, and the rows committed before
//     the snapshot are in no part of the stream either;
//   - a column renamed, dropped or retyped, and a partition attached or
//     detached, makes the COPY fail, or read rows of a shape the stream
//     does not describe;
//   - a table renamed before the slot existed keeps its old name in
//     ClickHouse, as no stream ever tells the new one.
// A table renamed, or whose columns or partitions changed (between ferry's reading of
// its description and its lock: the change may precede the snapshot too)
// stops the initial copy, which starts again from a new slot, whose
// snapshot and description both follow the change. A table rewritten
// without a change of shape (TRUNCATE, VACUUM FULL, CLUSTER, SET ACCESS
// METHOD) is left out of the initial copy and copied afterwards under a
// snapshot of its own, as a restart copies a table whose rows ClickHouse
// lacks (copyMissing): that copy locks before its snapshot, and its
// copyCut leaves out of the stream what it holds.

// errChangedAtStart stops an initial copy that read a table's description
// before a change of the table's shape: Run starts again.
var errChangedAtStart = errors.New("a table changed while the initial copy started")

// errRenamedAtStart is errChangedAtStart for a table renamed: the
// ClickHouse table of its old name, made for this copy, is dropped.
var errRenamedAtStart = fmt.Errorf("%w: renamed", errChangedAtStart)

// changedSinceSnapshot tells why the table of rel, just locked in conn's
// transaction, cannot be copied under that transaction's snapshot, or ""
// when it can, and then makes the partitions' files the copy reads rel's
// baseline (see partguard.go); an error wrapping errChangedAtStart when its
// shape is no longer rel's. fresh is a connection outside the transaction, whose
// statements see the catalog as it is now (the lock keeps it so).
func changedSinceSnapshot(ctx context.Context, conn, fresh *pgx.Conn, rel *relation) (string, error) {
	now, err := describeTable(ctx, fresh, rel.ref)
	if err != nil {
		return "", fmt.Errorf("copy of %s: %w", rel.ref, err)
	}
	now.restrict(rel.doc.Kept, rel.doc.RowFilter, rel.doc.Excluded)
	if now.doc.Schema != rel.ref.Schema || now.doc.Name != rel.ref.Name {
		// Renamed before the slot existed, the stream would never say so.
		return "", fmt.Errorf("%w: %s was renamed to %s.%s after ferry read it; copying again from a new slot",
			errRenamedAtStart, rel.ref, now.doc.Schema, now.doc.Name)
	}
	if !sameColumns(rel.doc.Columns, now.doc.Columns) {
		return "", fmt.Errorf("%w: the columns of %s changed after ferry read them; copying again from a new slot", errChangedAtStart, rel.ref)
	}
	if !slices.Equal(rel.partitions, now.partitions) {
		return "", fmt.Errorf("%w: the partitions of %s changed after ferry read them; copying again from a new slot", errChangedAtStart, rel.ref)
	}
	// relfilenode as the snapshot sees it against the file the table has
	// now (pg_relation_filenode reads the relation cache, not the snapshot);
	// a partitioned table's leaves each (pg_partition_tree lists nothing
	// for a table that is not partitioned).
	var rewritten []string
	rows, err := conn.Query(ctx, `SELECT c.oid::regclass::text FROM pg_class c
		WHERE (c.oid = $1 OR c.oid IN (SELECT relid FROM pg_partition_tree($1::oid::regclass)))
		AND c.relkind NOT IN ('p', 'I') AND c.relfilenode IS DISTINCT FROM pg_relation_filenode(c.oid)`, rel.ref.OID)
	if err != nil {
		return "", fmt.Errorf("copy of %s: compare its file with the snapshot's: %w", rel.ref, err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return "", fmt.Errorf("copy of %s: %w", rel.ref, err)
		}
		rewritten = append(rewritten, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("copy of %s: compare its file with the snapshot's: %w", rel.ref, err)
	}
	if len(rewritten) > 0 {
		return fmt.Sprintf("%v rewritten or truncated after the initial copy's snapshot was taken", rewritten), nil
	}
	// No file changed since the snapshot, so the partitions' files now are
	// the ones the copy reads; those in rel's description may be older: a
	// root TRUNCATE between ferry's reading of it and the snapshot, which
	// the stream, starting after it, never brings. Left in the baseline,
	// the partition guard would take the new files for a change the
	// stream cannot explain, and stop ferry for good.
	if err := refreshLeaves(ctx, fresh, rel); err != nil {
		return "", fmt.Errorf("copy of %s: %w", rel.ref, err)
	}
	return "", nil
}

// sameColumns reports whether two descriptions have the same columns, by
// position, attnum, name and declared type.
func sameColumns(a, b []catalogColumn) bool {
	return slices.EqualFunc(a, b, func(x, y catalogColumn) bool {
		return x.Attnum == y.Attnum && x.Name == y.Name && x.TypID == y.TypID && x.TypMod == y.TypMod
	})
}
