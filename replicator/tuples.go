package replicator

import "github.com/jackc/pglogrepl"

// Row changes are most of a stream's messages, and pglogrepl decodes each
// column of their tuples into an allocation of its own, copying its bytes
// one at a time: in a CPU profile of a catch-up that was a tenth to a
// fifth of ferry's CPU. parseRowChange decodes inserts, updates and deletes
// into the same pglogrepl messages with one allocation for a tuple's
// columns and one copy of its bytes, which the columns' Data share. It is
// called on messages checkTuples has found well-formed; anything it does
// not expect is left to pglogrepl.Parse (ok is false).
func parseRowChange(data []byte) (msg pglogrepl.Message, ok bool) {
	if len(data) < 6 {
		return nil, false
	}
	rel, rest := binaryUint32(data[1:]), data[5:]
	switch data[0] {
	case 'I':
		if len(data) < 9 || rest[0] != 'N' { // pglogrepl's bound: a table without columns is its to refuse
			return nil, false
		}
		m := &pglogrepl.InsertMessage{RelationID: rel}
		if m.Tuple, _, ok = decodeTuple(rest[1:]); !ok {
			return nil, false
		}
		m.SetType(pglogrepl.MessageTypeInsert)
		return m, true
	case 'U':
		m := &pglogrepl.UpdateMessage{RelationID: rel}
		if rest[0] == 'K' || rest[0] == 'O' {
			m.OldTupleType = rest[0]
			t, n, ok := decodeTuple(rest[1:])
			if !ok {
				return nil, false
			}
			m.OldTuple, rest = t, rest[1+n:]
		}
		if len(rest) < 3 || rest[0] != 'N' {
			return nil, false
		}
		if m.NewTuple, _, ok = decodeTuple(rest[1:]); !ok {
			return nil, false
		}
		m.SetType(pglogrepl.MessageTypeUpdate)
		return m, true
	case 'D':
		if rest[0] != 'K' && rest[0] != 'O' {
			return nil, false
		}
		m := &pglogrepl.DeleteMessage{RelationID: rel, OldTupleType: rest[0]}
		if m.OldTuple, _, ok = decodeTuple(rest[1:]); !ok {
			return nil, false
		}
		m.SetType(pglogrepl.MessageTypeDelete)
		return m, true
	}
	return nil, false
}

// A tuple's TupleData, its columns and the pointers to them are allocated
// together (tuple4, tuple8, tuple16), in a size that fits: allocation and
// the garbage collector's work were a quarter of a catch-up's CPU, and a
// room much larger than the tuple costs more to clear than it saves.
type tuple4 struct {
	data pglogrepl.TupleData
	cols [4]pglogrepl.TupleDataColumn
	ptrs [4]*pglogrepl.TupleDataColumn
}

type tuple8 struct {
	data pglogrepl.TupleData
	cols [8]pglogrepl.TupleDataColumn
	ptrs [8]*pglogrepl.TupleDataColumn
}

type tuple16 struct {
	data pglogrepl.TupleData
	cols [16]pglogrepl.TupleDataColumn
	ptrs [16]*pglogrepl.TupleDataColumn
}

// newTuple returns a TupleData of n columns and the storage of its
// columns, which its Columns point to.
func newTuple(n int) (*pglogrepl.TupleData, []pglogrepl.TupleDataColumn) {
	var t *pglogrepl.TupleData
	var store []pglogrepl.TupleDataColumn
	switch {
	case n == 0:
		return &pglogrepl.TupleData{}, nil
	case n <= 4:
		r := new(tuple4)
		t, store = &r.data, r.cols[:n]
		t.Columns = r.ptrs[:n:n]
	case n <= 8:
		r := new(tuple8)
		t, store = &r.data, r.cols[:n]
		t.Columns = r.ptrs[:n:n]
	case n <= 16:
		r := new(tuple16)
		t, store = &r.data, r.cols[:n]
		t.Columns = r.ptrs[:n:n]
	default:
		t, store = new(pglogrepl.TupleData), make([]pglogrepl.TupleDataColumn, n)
		t.Columns = make([]*pglogrepl.TupleDataColumn, n)
	}
	return t, store
}

// decodeTuple decodes the TupleData at the start of b and returns its
// length; ok is false when b does not hold a whole one.
func decodeTuple(b []byte) (t *pglogrepl.TupleData, n int, ok bool) {
	n, err := tupleLen(b)
	if err != nil {
		return nil, 0, false
	}
	buf := make([]byte, n-2)
	copy(buf, b[2:n])
	cols := int(b[0])<<8 | int(b[1])
	t, store := newTuple(cols)
	t.ColumnNum = uint16(cols)
	p := 0
	for i := range store {
		c := &store[i]
		c.DataType = buf[p]
		p++
		if c.DataType == pglogrepl.TupleDataTypeText || c.DataType == pglogrepl.TupleDataTypeBinary {
			c.Length = binaryUint32(buf[p:])
			p += 4
			end := p + int(c.Length)
			c.Data = buf[p:end:end]
			p = end
		}
		t.Columns[i] = c
	}
	return t, n, true
}
