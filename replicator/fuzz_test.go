package replicator

import (
	"bytes"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/ferry-cdc/ferry/schema"
)

// FuzzCopyReader feeds arbitrary bytes, in two writes, to the COPY text
// parser: it may reject them, never panic, and every row it accepts has
// the fields of its line: split at tabs, \N a NULL (nil), each other field
// unescaped and never nil.
func FuzzCopyReader(f *testing.F) {
	f.Add([]byte("1\ta\\tb\t\\N\n"), 3)
	f.Add([]byte("\\x41\\101\\\n\n"), 1)
	f.Add([]byte("\\"), 0)
	f.Add([]byte("\t\t\n\\N\n\\Nx\tab\\\\c\n"), 5)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		var got [][][]byte
		c := &copyReader{row: func(fields [][]byte) error {
			if len(fields) == 0 {
				t.Fatal("a row without fields")
			}
			row := make([][]byte, len(fields))
			for i, f := range fields {
				if f != nil {
					row[i] = append([]byte{}, f...)
				}
			}
			got = append(got, row)
			return nil
		}}
		if cut < 0 || cut > len(data) {
			cut = len(data) / 2
		}
		if _, err := c.Write(data[:cut]); err != nil {
			return
		}
		if _, err := c.Write(data[cut:]); err != nil {
			return
		}
		_ = c.Close()
		lines := bytes.Split(data, []byte("\n"))
		lines = lines[:len(lines)-1] // what follows the last newline is no row
		if len(got) != len(lines) {
			t.Fatalf("%d rows from %d lines", len(got), len(lines))
		}
		for i, l := range lines {
			fields := bytes.Split(l, []byte("\t"))
			if len(got[i]) != len(fields) {
				t.Fatalf("line %d: %d fields, want %d", i, len(got[i]), len(fields))
			}
			for k, f := range fields {
				if string(f) == `\N` {
					if got[i][k] != nil {
						t.Fatalf("line %d field %d: %q, want NULL", i, k, got[i][k])
					}
					continue
				}
				want, err := unescapeCopy(nil, f)
				if err != nil {
					t.Fatalf("line %d field %d: the reader took %q, which does not unescape: %v", i, k, f, err)
				}
				if got[i][k] == nil || !bytes.Equal(got[i][k], want) {
					t.Fatalf("line %d field %d: %q, want %q", i, k, got[i][k], want)
				}
			}
		}
	})
}

// FuzzDecode runs arbitrary pgoutput messages through parsing and tuple
// conversion for a table of assorted types: errors are fine, panics not.
func FuzzDecode(f *testing.F) {
	rel := fuzzRelation(f)
	ins := []byte{'I', 0, 0, 0, 1, 'N', 0, 4,
		't', 0, 0, 0, 2, '4', '2',
		't', 0, 0, 0, 3, '1', '.', '5',
		'n',
		't', 0, 0, 0, 10, '2', '0', '2', '4', '-', '0', '1', '-', '0', '1', ' '}
	f.Add(ins)
	f.Add([]byte{'U', 0, 0, 0, 1, 'K', 0, 4, 'n', 'n', 'n', 'n', 'N', 0, 4, 'u', 'u', 'u', 'u'})
	f.Add([]byte{'D', 0, 0, 0, 1, 'O', 0, 1, 'n'})
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := parseMessage(data)
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *pglogrepl.InsertMessage:
			_, _, _ = rel.values(m.Tuple, nil)
		case *pglogrepl.UpdateMessage:
			_, _, _ = rel.values(m.NewTuple, m.OldTuple)
			_ = rel.keyChanged(m.OldTuple, m.NewTuple)
			_, _ = rel.keyValues(m.OldTuple)
		case *pglogrepl.DeleteMessage:
			_, _ = rel.keyValues(m.OldTuple)
		}
	})
}

func fuzzRelation(f *testing.F) *relation {
	tm, err := schema.Map(schema.Table{Schema: "public", Name: "f", Columns: []schema.Column{
		{Name: "id", TypeOID: 20, TypeMod: -1, Key: true},
		{Name: "n", TypeOID: 1700, TypeMod: (10<<16 | 2) + 4},
		{Name: "a", TypeOID: 1007, ElemOID: 23, TypeMod: -1, NotNull: true},
		{Name: "ts", TypeOID: 1184, TypeMod: -1},
	}}, schema.Capabilities{})
	if err != nil {
		f.Fatal(err)
	}
	return &relation{ref: tableRef{Schema: "public", Name: "f"}, tm: tm, typeOIDs: []uint32{20, 1700, 1007, 1184}}
}
