package replicator

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// copyTables copies every table's rows as of the exported snapshot. Each
// ClickHouse table is emptied first, so a copy redone after a crash leaves
// no row of the interrupted one behind. Rows get Version 0: any change
// streamed afterwards wins over them. It returns the tables it left out
// because they changed between the snapshot and their lock (see
// copyrecheck.go), which the caller copies afterwards.
func (r *Replicator) copyTables(ctx context.Context, snapshot string, rels []*relation) ([]*relation, error) {
	fresh, err := connect(ctx, r.cfg.ConnString)
	if err != nil {
		return nil, err
	}
	defer fresh.Close(context.Background())
	jobs := make([]*copyJob, len(rels))
	for i, rel := range rels {
		jobs[i] = &copyJob{rel: rel, target: rel.tm, src: allColumns(rel), recheck: fresh}
	}
	err = r.inSnapshot(ctx, snapshot, func(conn *pgx.Conn) error {
		if err := r.memberAtSnapshot(ctx, conn, rels...); err != nil {
			return err
		}
		return r.copyJobs(ctx, conn, snapshot, jobs)
	})
	if err != nil {
		return nil, err
	}
	var deferred []*relation
	for _, j := range jobs {
		if j.deferred {
			deferred = append(deferred, j.rel)
		}
	}
	return deferred, nil
}

// inSnapshot runs fn in a read-only REPEATABLE READ transaction on a
// connection of its own, importing snapshot first unless it is "".
// memberAtSnapshot sets the membership (see membership.go) of each table
// that has none yet (a first copy, a table that joins, one copied again
// because ClickHouse lacks it) to the publications' catalog rows that
// published it under the snapshot of conn's transaction, the copy's: a
// drop from the publication and an ADD TABLE after the snapshot are what
// the stream must notice, even when both come before its first look at the
// catalog; a table out of them then gets outAtCopy. A table with a
// membership keeps it: a transaction in progress
// at the snapshot may have changed the table while it was out and commit
// after it, and neither the copy nor the stream holds those changes, so a
// return the table made before the snapshot must still count as one.
func (r *Replicator) memberAtSnapshot(ctx context.Context, conn *pgx.Conn, rels ...*relation) error {
	oids := make([]uint32, len(rels))
	for i, rel := range rels {
		oids[i] = rel.ref.OID
	}
	now, err := r.memberships(ctx, conn, oids)
	if err != nil {
		return fmt.Errorf("copy: read the publications' rows: %w", err)
	}
	for _, rel := range rels {
		switch m := now[rel.ref.OID]; {
		case len(rel.member) > 0:
		case len(m) > 0:
			rel.member = m
		default:
			// Out of the publications at the snapshot (dropped while ferry
			// started): the changes after it are not sent until the table
			// is back, and its return must count as one.
			rel.member = []string{outAtCopy}
		}
	}
	return nil
}

// outAtCopy is the membership of a table copied while no publication held
// it: no catalog row is named so, so whatever publishes it later is a
// return (see rejoined).
const outAtCopy = "out-at-copy"

func (r *Replicator) inSnapshot(ctx context.Context, snapshot string, fn func(conn *pgx.Conn) error) error {
	conn, tx, err := beginSnapshot(ctx, r.cfg.ConnString, snapshot)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	defer tx.Rollback(context.Background())
	if err := fn(conn); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// beginSnapshot opens a connection and begins on it a read-only REPEATABLE
// READ transaction that imports snapshot unless it is "". The caller closes
// the connection.
func beginSnapshot(ctx context.Context, connString, snapshot string) (*pgx.Conn, pgx.Tx, error) {
	conn, err := connectBuffered(ctx, connString)
	if err != nil {
		return nil, nil, err
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		conn.Close(context.Background())
		return nil, nil, fmt.Errorf("copy: begin: %w", err)
	}
	if snapshot != "" {
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(snapshot)); err != nil {
			conn.Close(context.Background())
			return nil, nil, fmt.Errorf("copy: import snapshot %s: %w", snapshot, err)
		}
	}
	return conn, tx, nil
}

// copyFresh copies a table under a snapshot of its own, for a table that
// joins, is rebuilt or is copied again at a restart while the stream is at
// an earlier point: any snapshot taken after the change that caused it is
// consistent, since the copy's rows get a version below every change the
// stream brings that the snapshot does not hold, and rel.copied is set to
// the snapshot's copyCut, which leaves out the others (see copycut.go).
func (r *Replicator) copyFresh(ctx context.Context, rel *relation, target *schema.TableMap) error {
	return r.copyUnder(ctx, rel, target, nil)
}

// copyUnder is copyFresh. started, when not nil, is called with the copy's
// cut once its snapshot is taken and target emptied, before any row is
// written to it (so that the stream may write to target beside the copy);
// a stale copy's request to check the table's shape again is then left to
// the caller.
func (r *Replicator) copyUnder(ctx context.Context, rel *relation, target *schema.TableMap, started func(*copyCut)) error {
	conn, err := connectBuffered(ctx, r.cfg.ConnString)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if rel.joining {
		if err := waitForWriters(ctx, conn, rel.ref, r.log); err != nil {
			return err
		}
	}
	// Locked before the snapshot is taken, the table is described as it
	// stays until the copy ends.
	tx, err := beginLocked(ctx, conn, rel.ref)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read-only; a no-op after Commit
	now, err := describeTable(ctx, conn, rel.ref)
	if err != nil {
		return err
	}
	// The partitions the stream watches from here on are those the copy
	// sees: a TRUNCATE of the root the snapshot holds is left out of the
	// stream, so nothing after the copy would explain its new files.
	if err := refreshLeaves(ctx, conn, rel); err != nil {
		return fmt.Errorf("copy of %s: %w", rel.ref, err)
	}
	cut, version, err := readCut(ctx, conn, r.cfg.Slot)
	if err != nil {
		return fmt.Errorf("copy of %s: %w", rel.ref, err)
	}
	if err := r.memberAtSnapshot(ctx, conn, rel); err != nil {
		return err
	}
	// A column added since the stream's point is not read: the ClickHouse
	// table lacks it until the stream brings the change, and the rows the
	// copy holds are left out of the stream, so that change must rebuild
	// too, not add the column in place (which would leave it NULL in the
	// copied rows that have a value there).
	published := now
	published.restrict(rel.doc.Kept, rel.tm.Source.RowFilter, rel.doc.Excluded)
	src := project(rel, published)
	rel.stale = src.placeholders > 0 || src.unread > 0
	if rel.stale {
		r.log.Warn("the table changed again since the point the stream is at: columns that no longer match are copied as empty values, "+
			"columns added since are left out, and the table is rebuilt again when the stream reaches the later change",
			zap.Stringer("table", rel.ref), zap.Int("columns", src.placeholders), zap.Int("added", src.unread))
	}
	// Further workers share this transaction's snapshot.
	var snapshot string
	if r.cfg.CopyWorkers > 1 {
		if err := conn.QueryRow(ctx, "SELECT pg_export_snapshot()").Scan(&snapshot); err != nil {
			return fmt.Errorf("copy of %s: export snapshot: %w", rel.ref, err)
		}
	}
	job := &copyJob{rel: rel, target: target, version: version, src: src}
	if started != nil {
		job.planned = func() { started(cut) }
	}
	if err := r.copyJobs(ctx, conn, snapshot, []*copyJob{job}); err != nil {
		return err
	}
	rel.copied = cut
	rel.joining = false
	if !rel.stale {
		rel.shapedAt = max(rel.shapedAt, cut.End) // the table's shape as of the snapshot
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	if rel.stale && started == nil {
		return r.recheckStale(ctx, conn, rel)
	}
	return nil
}

// source says which of the stream's columns a copy reads from the
// catalog's current columns, by name.
type source struct {
	table        tableRef // the table as it is named now
	read         []string // current names of the columns read, in order
	where        string   // the row filter (schema.Table.RowFilter); "" for every row
	from         []int    // per stream column, its index in read; -1 for a placeholder
	placeholders int
	unread       int // the table's columns that match no stream column (added since)
}

// allColumns reads every stream column as it is named.
func allColumns(rel *relation) source {
	src := source{table: rel.ref, where: rel.tm.Source.RowFilter}
	for i, c := range rel.tm.Source.Columns {
		src.read = append(src.read, c.Name)
		src.from = append(src.from, i)
	}
	return src
}

// project matches the stream's columns with the catalog's current ones:
// by attnum where both are known (a rename keeps it), else by name, and
// only when the declared type is the same.
func project(rel *relation, now described) source {
	src := source{table: tableRef{OID: rel.ref.OID, Schema: now.table.Schema, Name: now.table.Name}, where: rel.tm.Source.RowFilter}
	for i, c := range rel.tm.Source.Columns {
		j := -1
		for k, nc := range now.table.Columns {
			same := nc.Name == c.Name
			if i < len(rel.attnums) && rel.attnums[i] > 0 && now.attnums[k] > 0 {
				same = rel.attnums[i] == now.attnums[k]
			}
			if same && now.typeOIDs[k] == rel.typeOIDs[i] && nc.TypeMod == c.TypeMod {
				j = k
			}
		}
		if j < 0 {
			src.from = append(src.from, -1)
			src.placeholders++
			continue
		}
		src.from = append(src.from, len(src.read))
		src.read = append(src.read, now.table.Columns[j].Name)
	}
	src.unread = len(now.table.Columns) - len(src.read)
	return src
}

// copyValues converts one COPY row into vals, one per column; from maps
// each column to its field (-1: a placeholder, the column's zero value). It
// returns the row's estimated size.
func (rel *relation) copyValues(vals []any, fields [][]byte, from []int) (int, error) {
	cols := rel.tm.Columns
	size := 16 * len(cols)
	for i := range cols {
		j := from[i]
		if j < 0 {
			vals[i] = cols[i].Zero()
			continue
		}
		if j >= len(fields) {
			return 0, fmt.Errorf("copy of %s: got %d fields, want at least %d", rel.ref, len(fields), j+1)
		}
		f := fields[j]
		v, err := cols[i].Convert(f, f == nil)
		if err != nil {
			return 0, fmt.Errorf("copy of %s, row %s: %w", rel.ref, rel.copyKey(fields, from, false), err)
		}
		vals[i] = v
		size += len(f)
	}
	return size, nil
}

// copyColumns converts one COPY row into cols, as copyValues does, and
// returns the row's estimated size. A FullRow table's row gets its key.
// bins, when not nil, are cols' builders as BinaryBuilders: the fields are
// in COPY's binary format.
func (rel *relation) copyColumns(cols *loader.Columns, bins []schema.BinaryBuilder, fields [][]byte, from []int) (int, error) {
	size := 16 * len(cols.Cols)
	n := cols.Len()
	for i, b := range cols.Cols {
		j := from[i]
		if j < 0 {
			b.AppendZero()
			continue
		}
		if j >= len(fields) {
			cols.Truncate(n)
			return 0, fmt.Errorf("copy of %s: got %d fields, want at least %d", rel.ref, len(fields), j+1)
		}
		f := fields[j]
		var err error
		if bins != nil {
			err = bins[i].AppendBinary(f, f == nil)
		} else {
			err = b.Append(f, f == nil)
		}
		if err != nil {
			cols.Truncate(n)
			return 0, fmt.Errorf("copy of %s, row %s: %w", rel.ref, rel.copyKey(fields, from, bins != nil), err)
		}
		size += len(f)
	}
	if rel.tm.Source.FullRow {
		row := cols.Row(n)
		if err := rel.setRowKey(&row); err != nil {
			cols.Truncate(n)
			return 0, err
		}
		cols.RowKeys = append(cols.RowKeys, row.RowKey)
	}
	return size, nil
}

// copyKey describes a COPY row by its key, as the stream's errors do; a
// binary row's key values are read and written as text first.
func (rel *relation) copyKey(fields [][]byte, from []int, binary bool) string {
	return rel.keyText(func(k int) ([]byte, bool) {
		j := from[k]
		if j < 0 || j >= len(fields) {
			return nil, false
		}
		if !binary {
			return fields[j], true
		}
		b, ok := rel.tm.Columns[k].NewBuilder().(schema.BinaryBuilder)
		if !ok || b.AppendBinary(fields[j], fields[j] == nil) != nil {
			return nil, false
		}
		return []byte(schema.Canonical(b.Value(0))), true
	})
}

// copySQL reads columns of a table, the rows of pages rng that satisfy
// where (any when ""); the SELECT form also works for a partitioned table,
// whose rows live in its partitions. With no columns it still reads one
// (empty) field per row. The filter is one more condition beside the
// range's: the ranges still split the rows it keeps exactly. binary asks
// for COPY's binary format.
func copySQL(ref tableRef, cols []string, rng pageRange, where string, binary bool) string {
	list := "''"
	if len(cols) > 0 {
		quoted := make([]string, len(cols))
		for i, c := range cols {
			quoted[i] = schema.QuotePG(c)
		}
		list = strings.Join(quoted, ", ")
	}
	cond := rng.where()
	if where != "" {
		if cond == "" {
			cond = " WHERE (" + where + ")"
		} else {
			cond = " WHERE (" + where + ") AND" + cond[len(" WHERE"):]
		}
	}
	format := ""
	if binary {
		format = " (FORMAT binary)"
	}
	return fmt.Sprintf("COPY (SELECT %s FROM %s%s) TO STDOUT%s", list, ref.quoted(), cond, format)
}

func (r tableRef) quoted() string { return schema.QuotePG(r.Schema) + "." + schema.QuotePG(r.Name) }

// quoteLiteral quotes a string for SQL.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
