package replicator

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// relation is a replicated table as the stream sees it.
type relation struct {
	ref      tableRef
	tm       *schema.TableMap
	typeOIDs []uint32 // each column's declared type (a domain, not its base), as pgoutput names it
	// From the catalog or a DDL event, for telling what a schema change did:
	attnums    []int    // a rename keeps a column's attnum
	hasDefault []bool   // an added column with a default holds values ClickHouse lacks
	partitions []uint32 // a change means a partition was attached or detached
	doc        catalogTable
	// stale: the ClickHouse table holds placeholders for columns the copy
	// could not read as the stream describes them; the next change rebuilds.
	stale bool
	// copied, after a copy taken while the stream ran, tells which
	// transactions the copy holds: the stream leaves their changes out.
	copied *copyCut
	// truncated is the commit position of the transaction of the table's
	// last TRUNCATE that ferry applied: a replay leaves out the changes of
	// transactions that committed before it (see stream.truncate).
	truncated pglogrepl.LSN
	// shapedAt is the WAL position of the shape the ClickHouse table has:
	// of the last schema change applied to it, or of a copy that gave it
	// the table's shape of the time. A schema change from before it is
	// the stream's history, received again after a restart (see evolve).
	shapedAt uint64
	// member names the publication catalog rows that published the table
	// when ferry last looked (see membership.go).
	member []string
	// recopy, while the table waits for the copy that follows its return
	// to the publication, names the request for that copy (its At, see
	// membership.go); empty otherwise.
	recopy string
	// leftToCopy counts the updates left to that copy (see leaveToCopy).
	leftToCopy int
	// counters count its changes for the Observer, by op (see observe).
	counters map[string]func()
	// bins read a binary stream's values, one builder a column (nil for a
	// column read as text only), made for binTM (see binaryBuilder).
	bins  []schema.BinaryBuilder
	binTM *schema.TableMap
	// joining is set while the table's next copy follows its joining the
	// publication: the copy first waits for the transactions writing to it
	// then (see waitForWriters).
	joining bool
}

// values converts a pgoutput tuple into row values. An unchanged TOAST
// column takes its value from old (the REPLICA IDENTITY FULL old tuple)
// when old has it, else becomes loader.Unchanged for the sink to resolve.
// It returns the values and the bytes they came from.
func (r *relation) values(tuple, old *pglogrepl.TupleData) ([]any, int, error) {
	cols := r.tm.Columns
	if tuple == nil || len(tuple.Columns) != len(cols) {
		n := 0
		if tuple != nil {
			n = len(tuple.Columns)
		}
		return nil, 0, fmt.Errorf("table %s: pgoutput sent %d columns, ferry knows %d, and no Relation message told of a change of shape in between: "+
			"ferry lost track of the table's shape (a defect: please report it with the log); to recover, drop the ClickHouse table and start ferry again to copy it anew", r.ref, n, len(cols))
	}
	vals := make([]any, len(cols))
	size := 0
	for i, c := range tuple.Columns {
		if c.DataType == pglogrepl.TupleDataTypeToast && old != nil && i < len(old.Columns) && hasValue(old.Columns[i]) {
			c = old.Columns[i]
		}
		switch c.DataType {
		case pglogrepl.TupleDataTypeNull:
			v, err := cols[i].Convert(nil, true)
			if err != nil {
				return nil, 0, r.valueErr(tuple, err)
			}
			vals[i] = v
		case pglogrepl.TupleDataTypeToast:
			vals[i] = loader.Unchanged
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			v, err := r.value(i, c)
			if err != nil {
				return nil, 0, r.valueErr(tuple, err)
			}
			vals[i] = v
			size += len(c.Data)
		default:
			return nil, 0, fmt.Errorf("table %s: column %q came in format %q, which pgoutput does not send", r.ref, cols[i].Name, c.DataType)
		}
	}
	return vals, size, nil
}

// hasValue: the column carries a value, in text or binary form.
func hasValue(c *pglogrepl.TupleDataColumn) bool {
	return c.DataType == pglogrepl.TupleDataTypeText || c.DataType == pglogrepl.TupleDataTypeBinary
}

// value converts column i's value, in the form the tuple carries it: text,
// or binary when the stream asked for binary (see binaryStream). A binary
// value goes through the column's BinaryBuilder, the copy's reader, which
// gives the value and the error that the same value's text gives.
func (r *relation) value(i int, c *pglogrepl.TupleDataColumn) (any, error) {
	if c.DataType == pglogrepl.TupleDataTypeText {
		return r.tm.Columns[i].Convert(c.Data, false)
	}
	b := r.binaryBuilder(i)
	if b == nil {
		return nil, fmt.Errorf("column %q came in binary form, which ferry reads as text only: %w", r.tm.Columns[i].Name, errStreamText)
	}
	b.Reset()
	if err := b.AppendBinary(c.Data, false); err != nil {
		return nil, err
	}
	return b.Value(0), nil
}

// binaryBuilder is column i's builder for reading binary values one at a
// time, nil when ferry reads the column's type as text only.
func (r *relation) binaryBuilder(i int) schema.BinaryBuilder {
	if r.binTM != r.tm {
		r.bins, r.binTM = make([]schema.BinaryBuilder, len(r.tm.Columns)), r.tm
		for k, cm := range r.tm.Columns {
			if b, ok := cm.NewBuilder().(schema.BinaryBuilder); ok && cm.Binary() {
				r.bins[k] = b
			}
		}
	}
	return r.bins[i]
}

// readsBinary reports whether ferry reads every column of the table in
// binary form.
func (r *relation) readsBinary() bool {
	for _, cm := range r.tm.Columns {
		if !cm.Binary() {
			return false
		}
	}
	return true
}

// keyValues converts the key columns of a tuple (a 'K' or 'O' old tuple,
// or a new tuple) into a deleted row's values: the key, and zero values
// elsewhere.
func (r *relation) keyValues(tuple *pglogrepl.TupleData) ([]any, error) {
	cols := r.tm.Columns
	if tuple == nil || len(tuple.Columns) != len(cols) {
		return nil, fmt.Errorf("table %s: a delete came without its key: set REPLICA IDENTITY on the table (a primary key, USING INDEX, or FULL)", r.ref)
	}
	vals := make([]any, len(cols))
	for i := range cols {
		vals[i] = cols[i].Zero()
	}
	for _, k := range r.tm.Key {
		c := tuple.Columns[k]
		if !hasValue(c) {
			return nil, fmt.Errorf("table %s: key column %q missing from the old tuple", r.ref, cols[k].Name)
		}
		v, err := r.value(k, c)
		if err != nil {
			return nil, r.valueErr(tuple, err)
		}
		vals[k] = v
	}
	return vals, nil
}

// setRowKey sets a FullRow table's row key: a hash of all its values,
// encoded with schema.AppendEncoded. Other tables' rows are left alone. It
// is idempotent.
func (r *relation) setRowKey(row *loader.Row) error {
	if !r.tm.Source.FullRow || row.RowKey != "" {
		return nil
	}
	var buf []byte
	for i, v := range row.Values {
		if v == loader.Unchanged {
			return fmt.Errorf("table %s: column %q came as an unchanged TOAST value without the old row's value, "+
				"so the row cannot be identified: add a primary key to the table", r.ref, r.tm.Columns[i].Name)
		}
		buf = schema.AppendRowKeyValue(buf, v, r.tm.Source)
	}
	// A hash keeps the sorting key short whatever the row holds; 128 bits
	// make a collision between two rows of one table beyond reach.
	sum := sha256.Sum256(buf)
	row.RowKey = hex.EncodeToString(sum[:16])
	return nil
}

// keyChanged reports whether an update moved the row to another key.
func (r *relation) keyChanged(old, new *pglogrepl.TupleData) bool {
	if old == nil || new == nil || len(old.Columns) != len(new.Columns) {
		return false
	}
	for _, k := range r.tm.Key {
		o, n := old.Columns[k], new.Columns[k]
		if n.DataType == pglogrepl.TupleDataTypeToast {
			continue // an unchanged key column did not change
		}
		if o.DataType != n.DataType || !bytes.Equal(o.Data, n.Data) {
			return true
		}
	}
	return false
}

// valueErr names the table and, where it can, the row's key.
func (r *relation) valueErr(tuple *pglogrepl.TupleData, err error) error {
	return fmt.Errorf("table %s, row %s: %w", r.ref, r.describeKey(tuple), err)
}

func (r *relation) describeKey(tuple *pglogrepl.TupleData) string {
	return r.keyText(func(k int) ([]byte, bool) {
		if tuple == nil || k >= len(tuple.Columns) {
			return nil, false
		}
		c := tuple.Columns[k]
		if c.DataType != pglogrepl.TupleDataTypeBinary {
			return c.Data, true
		}
		v, err := r.value(k, c)
		if err != nil {
			return nil, false
		}
		return []byte(schema.Canonical(v)), true
	})
}

// keyText describes a row by its key columns' text, which field gives
// for each key column's index (ok false when the row does not hold it).
func (r *relation) keyText(field func(k int) (text []byte, ok bool)) string {
	var parts []string
	for _, k := range r.tm.Key {
		text, ok := field(k)
		if !ok {
			return "(key unknown)"
		}
		v := string(text)
		if len(v) > 64 {
			v = v[:64] + "…"
		}
		parts = append(parts, fmt.Sprintf("%s=%q", r.tm.Columns[k].Name, v))
	}
	if len(parts) == 0 {
		return "(no key)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
