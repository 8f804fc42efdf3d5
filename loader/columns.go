package loader

import "github.com/ferry-cdc/ferry/schema"

// Columns holds rows of one table column by column, as the initial copy
// reads them: every row is an insert of the copy's Version, row i of an
// append-only table has Seq FirstSeq+i, and a FullRow table's rows carry
// RowKeys. A sink that takes Columns (see clickhouse.Sink.InsertStream)
// hands typed columns to its driver whole; Rows turns them into Rows for
// the others.
type Columns struct {
	Cols     []schema.ColumnBuilder // one per column of the table, all of one length
	Version  uint64
	FirstSeq uint64
	RowKeys  []string // FullRow tables only
}

// Len is the number of rows held.
func (c *Columns) Len() int {
	if len(c.Cols) == 0 {
		return 0
	}
	return c.Cols[0].Len()
}

// Row returns row i as a Row.
func (c *Columns) Row(i int) Row { return c.RowInto(i, make([]any, len(c.Cols))) }

// RowInto returns row i as a Row whose Values are vals, which must hold
// one value per column.
func (c *Columns) RowInto(i int, vals []any) Row {
	r := Row{Values: vals, Version: c.Version, Seq: c.FirstSeq + uint64(i)}
	for j, b := range c.Cols {
		r.Values[j] = b.Value(i)
	}
	if i < len(c.RowKeys) {
		r.RowKey = c.RowKeys[i]
	}
	return r
}

// Rows returns every row held as a Row.
func (c *Columns) Rows() []Row {
	rows := make([]Row, 0, c.Len())
	for i := range c.Len() {
		rows = append(rows, c.Row(i))
	}
	return rows
}

// Truncate keeps the first n rows: it takes back a row partly appended.
func (c *Columns) Truncate(n int) {
	for _, b := range c.Cols {
		if b.Len() > n {
			b.Truncate(n)
		}
	}
	if len(c.RowKeys) > n {
		c.RowKeys = c.RowKeys[:n]
	}
}

// Reset empties the columns, keeping their memory.
func (c *Columns) Reset() {
	for _, b := range c.Cols {
		b.Reset()
	}
	c.RowKeys = c.RowKeys[:0]
}
