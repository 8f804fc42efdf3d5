package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// Write stores the batch as one INSERT, after resolving its Unchanged
// values. See the package documentation for what an error means.
func (s *Sink) Write(ctx context.Context, b *loader.Batch) error {
	if b == nil || len(b.Rows) == 0 {
		return nil
	}
	tm := b.Table
	if tm == nil {
		return reject(errors.New("clickhouse: write: batch has no table"))
	}
	for i := range b.Rows {
		if n := len(b.Rows[i].Values); n != len(tm.Columns) {
			return reject(fmt.Errorf("clickhouse: write %s: row %d has %d values for %d columns",
				s.table(tm.Name), i, n, len(tm.Columns)))
		}
	}
	rows, err := s.resolveUnchanged(ctx, tm, b.Rows)
	if err != nil {
		return err
	}
	if err := s.insert(ctx, tm, rows); err != nil {
		return s.explainRejected(ctx, tm, rows, err)
	}
	s.log.Debug("wrote batch", zap.String("table", tm.Name), zap.Int("rows", len(rows)))
	return nil
}

// insertQuery is the mapping's INSERT for clickhouse-go's PrepareBatch,
// written so that the driver's parser of INSERT statements reads it right.
//
// That parser takes the table name to end at the first "(", and the column
// list to hold at most one level of balanced parentheses, whatever the
// quoting: so a "(" or ")" inside a backticked name is written as the escape
// \x28 or \x29, which ClickHouse decodes. It also takes the names out of the
// column list without undoing ClickHouse's escapes (a name with a backtick
// or a newline would not be found) to reorder the block the server sends
// back; the server already sends the columns in the list's order, so the
// list is hidden from it (its pattern wants exactly one space after INTO),
// and insert checks the block's columns itself.
func insertQuery(sql string) string {
	const prefix = "INSERT INTO "
	if len(sql) >= len(prefix) && strings.EqualFold(sql[:len(prefix)], prefix) {
		sql = "INSERT INTO\n" + sql[len(prefix):]
	}
	var b strings.Builder
	b.Grow(len(sql) + 16)
	quoted := false
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case quoted && c == '\\' && i+1 < len(sql):
			b.WriteByte(c)
			i++
			b.WriteByte(sql[i])
		case quoted && c == '(':
			b.WriteString(`\x28`)
		case quoted && c == ')':
			b.WriteString(`\x29`)
		default:
			if c == '`' {
				quoted = !quoted
			}
			b.WriteByte(c)
		}
	}
	return b.String()
}

// insertColumns are the columns of the mapping's INSERT, in its order.
func insertColumns(tm *schema.TableMap) []string {
	names := make([]string, 0, len(tm.Columns)+3)
	for _, c := range tm.Columns {
		names = append(names, c.Name)
	}
	return append(names, tm.MetaColumns()...)
}

func (s *Sink) insert(ctx context.Context, tm *schema.TableMap, rows []loader.Row) error {
	name := s.table(tm.Name)
	batch, err := s.prepareInsert(ctx, tm)
	if err != nil {
		return err
	}
	sent := false
	defer func() {
		if !sent {
			_ = batch.Abort()
		}
	}()
	if err := checkInsertTypes(name, tm, batch.Columns(), rows); err != nil {
		return err
	}
	if beyondDriver(tm, rows) {
		return s.insertExternal(ctx, tm, batch.Columns(), rows)
	}
	if err := appendRows(batch, tm, rows); err != nil {
		return reject(fmt.Errorf("clickhouse: insert into %s: %w", name, err))
	}
	sent = true
	if err := batch.Send(); err != nil {
		return s.red.wrap(classify(err), "clickhouse: insert %d rows into %s", len(rows), name)
	}
	return nil
}

// prepareInsert starts the mapping's INSERT and checks that the server
// expects the columns ferry sends, in its order.
func (s *Sink) prepareInsert(ctx context.Context, tm *schema.TableMap) (driver.Batch, error) {
	name := s.table(tm.Name)
	batch, err := s.conn.PrepareBatch(jsonInsertContext(ctx, tm), insertQuery(tm.InsertSQL(s.db)))
	if err != nil {
		return nil, s.red.wrap(classify(err), "clickhouse: insert into %s", name)
	}
	want := insertColumns(tm)
	got := batch.Columns()
	if len(got) != len(want) {
		_ = batch.Abort()
		return nil, reject(fmt.Errorf("clickhouse: insert into %s: server expects %d columns, ferry sends %d",
			name, len(got), len(want)))
	}
	for i, c := range got {
		if c.Name() != want[i] {
			_ = batch.Abort()
			return nil, reject(fmt.Errorf("clickhouse: insert into %s: column %d is %q on the server, ferry sends %q",
				name, i, c.Name(), want[i]))
		}
	}
	return batch, nil
}

// appendRows fills the batch column by column: the values, then ferry's
// version, deleted flag and, for append-only tables, sequence number.
func appendRows(batch driver.Batch, tm *schema.TableMap, rows []loader.Row) error {
	server := batch.Columns()
	var scratch []byte
	for j := range tm.Columns {
		col := batch.Column(j)
		values := func(w wireForm) wireAt { return w.rowValues(rows, j) }
		if done, err := appendWire(server[j], len(rows), values, &scratch); done || err != nil {
			if err != nil {
				return fmt.Errorf("column %q (%s): %w", tm.Columns[j].Name, tm.Columns[j].Type, err)
			}
			continue
		}
		for i := range rows {
			if err := col.AppendRow(rows[i].Values[j]); err != nil {
				return fmt.Errorf("column %q (%s), row with key %s: %w",
					tm.Columns[j].Name, tm.Columns[j].Type, rowKey(tm, rows[i], i), err)
			}
		}
	}
	return appendMeta(batch, tm, len(rows), func(i int) (uint64, bool, uint64, string) {
		r := &rows[i]
		return r.Version, r.Deleted, r.Seq, r.RowKey
	})
}

// appendMeta fills ferry's columns of n rows after the values: version,
// deleted flag and, for append-only tables, sequence number or, for
// FullRow tables, row key; row tells them for row i.
func appendMeta(batch driver.Batch, tm *schema.TableMap, n int, row func(i int) (version uint64, deleted bool, seq uint64, key string)) error {
	k := len(tm.Columns)
	versions := make([]uint64, n)
	deleted := make([]uint8, n)
	var seqs []uint64
	var keys []string
	switch {
	case tm.Source.AppendOnly:
		seqs = make([]uint64, n)
	case tm.Source.FullRow:
		keys = make([]string, n)
	}
	for i := range n {
		v, d, seq, key := row(i)
		versions[i], deleted[i] = v, boolUint8(d)
		if seqs != nil {
			seqs[i] = seq
		}
		if keys != nil {
			keys[i] = key
		}
	}
	if err := batch.Column(k).Append(versions); err != nil {
		return fmt.Errorf("column %s: %w", schema.VersionColumn, err)
	}
	if err := batch.Column(k + 1).Append(deleted); err != nil {
		return fmt.Errorf("column %s: %w", schema.DeletedColumn, err)
	}
	switch {
	case seqs != nil:
		if err := batch.Column(k + 2).Append(seqs); err != nil {
			return fmt.Errorf("column %s: %w", schema.SeqColumn, err)
		}
	case keys != nil:
		if err := batch.Column(k + 2).Append(keys); err != nil {
			return fmt.Errorf("column %s: %w", schema.RowKeyColumn, err)
		}
	}
	return nil
}

// appendColumns fills the batch with cols: a typed column whose server
// type is the mapping's goes to the driver whole, the others value by
// value as appendRows does; then ferry's columns (appendMeta).
func appendColumns(batch driver.Batch, tm *schema.TableMap, cols *loader.Columns) error {
	server := batch.Columns()
	n := cols.Len()
	var scratch []byte
	for j, b := range cols.Cols {
		col := batch.Column(j)
		if string(server[j].Type()) == tm.Columns[j].Type {
			values := func(wireForm) wireAt { return builderValues(b) }
			if done, err := appendWire(server[j], n, values, &scratch); done || err != nil {
				if err != nil {
					return fmt.Errorf("column %q (%s): %w", tm.Columns[j].Name, tm.Columns[j].Type, err)
				}
				continue
			}
		}
		if vals, ok := wholeColumn(server[j], tm.Columns[j], b); ok {
			if err := col.Append(vals); err != nil {
				return fmt.Errorf("column %q (%s), rows with keys %s to %s: %w", tm.Columns[j].Name, tm.Columns[j].Type,
					rowKey(tm, cols.Row(0), 0), rowKey(tm, cols.Row(n-1), n-1), err)
			}
			continue
		}
		for i := range n {
			if err := col.AppendRow(b.Value(i)); err != nil {
				return fmt.Errorf("column %q (%s), row with key %s: %w",
					tm.Columns[j].Name, tm.Columns[j].Type, rowKey(tm, cols.Row(i), i), err)
			}
		}
	}
	if tm.Source.FullRow && len(cols.RowKeys) != n {
		return fmt.Errorf("column %s: %d row keys for %d rows", schema.RowKeyColumn, len(cols.RowKeys), n)
	}
	return appendMeta(batch, tm, n, func(i int) (uint64, bool, uint64, string) {
		var key string
		if i < len(cols.RowKeys) {
			key = cols.RowKeys[i]
		}
		return cols.Version, false, cols.FirstSeq + uint64(i), key
	})
}

// wholeColumn returns the typed values of b when the driver takes them
// whole into the server's column: the column is of the mapping's type, not
// one the driver would convert them to.
func wholeColumn(server column.Interface, cm schema.ColumnMap, b schema.ColumnBuilder) (any, bool) {
	vals, ok := b.Typed()
	if !ok || string(server.Type()) != cm.Type {
		return nil, false
	}
	return vals, true
}

// maxKeyInError bounds how much of a key value an error message quotes.
const maxKeyInError = 100

// rowKey describes a row for messages: its key values, or for a table
// without a key its position in the batch and its version.
func rowKey(tm *schema.TableMap, r loader.Row, i int) string {
	if len(tm.Key) == 0 {
		return fmt.Sprintf("(none: row %d of the batch, version %d, seq %d)", i, r.Version, r.Seq)
	}
	parts := make([]string, len(tm.Key))
	for n, k := range tm.Key {
		c := schema.Canonical(r.Values[k])
		if len(c) > maxKeyInError {
			c = c[:maxKeyInError] + "..."
		}
		parts[n] = tm.Columns[k].Name + "=" + c
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// classify marks server errors that are about the batch's content as not
// retryable; everything else is left for IsRetryable to judge.
func classify(err error) error {
	var ex *proto.Exception
	if errors.As(err, &ex) && !transientCodes[ex.Code] {
		return reject(err)
	}
	return err
}

func boolUint8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// InsertStream starts one INSERT into tm's table that takes rows in
// several parts: each send appends rows and sends them to the server as a
// block, reusing the block's buffers, and end(true) finishes the INSERT,
// after which every row sent is stored. ClickHouse squashes the blocks of
// one INSERT into parts of up to min_insert_block_size_rows, so a long
// stream of small sends leaves few parts to merge while ferry holds one
// block in memory. (A send holding a DateTime64 past 2262 is stored at
// once by an INSERT of its own instead: see rawtime.go.) Until end(true)
// returns nil no row is known to be
// stored, and after end(false), or an error, which abandon the INSERT,
// some of the rows sent may be: it is for the initial copy, which empties
// the table and starts again after a failure. Rows must not hold
// Unchanged values. send and end are called from one goroutine;
// several streams may run at once.
func (s *Sink) InsertStream(ctx context.Context, tm *schema.TableMap) (send func(cols *loader.Columns) error, end func(commit bool) error, err error) {
	name := s.table(tm.Name)
	batch, err := s.prepareInsert(ctx, tm)
	if err != nil {
		return nil, nil, err
	}
	var total int
	send = func(cols *loader.Columns) error {
		n := cols.Len()
		if n == 0 {
			return nil
		}
		if len(cols.Cols) != len(tm.Columns) {
			return reject(fmt.Errorf("clickhouse: insert into %s: %d columns of values for %d columns", name, len(cols.Cols), len(tm.Columns)))
		}
		for j, b := range cols.Cols {
			if b.Len() != n {
				return reject(fmt.Errorf("clickhouse: insert into %s: column %q has %d values, column %q %d",
					name, tm.Columns[j].Name, b.Len(), tm.Columns[0].Name, n))
			}
		}
		if total == 0 { // the server's column types stay for the whole INSERT
			if err := checkInsertTypes(name, tm, batch.Columns(), []loader.Row{cols.Row(0)}); err != nil {
				return err
			}
		}
		if beyondDriverColumns(tm, cols) { // stored now, apart from the stream's INSERT
			if err := s.insertExternal(ctx, tm, batch.Columns(), cols.Rows()); err != nil {
				return err
			}
			total += n
			return nil
		}
		if err := appendColumns(batch, tm, cols); err != nil {
			return reject(fmt.Errorf("clickhouse: insert into %s: %w", name, err))
		}
		if err := batch.Flush(); err != nil {
			return s.red.wrap(classify(err), "clickhouse: insert into %s (after %d rows)", name, total)
		}
		total += n
		return nil
	}
	end = func(commit bool) error {
		if !commit {
			_ = batch.Abort()
			return nil
		}
		if err := batch.Send(); err != nil {
			return s.red.wrap(classify(err), "clickhouse: insert %d rows into %s", total, name)
		}
		return nil
	}
	return send, end, nil
}

// ConcurrentWrites reports that Write, unlike the sink's other methods, may
// be called from several goroutines at once: each call takes a connection
// of its own from the driver's pool. The initial copy uses this to keep
// several INSERTs in flight.
func (s *Sink) ConcurrentWrites() bool { return true }
