package schema

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// everyType is a table with one column of each mapped type, arrays (one of
// them declared two-dimensional), an enum, extension types, a fallback
// type and awkward identifiers.
func everyType() Table {
	return Table{Schema: "sales", Name: "every type", Columns: []Column{
		{Name: "id", TypeOID: 20, TypeMod: -1, Key: true, NotNull: true},
		{Name: "region", TypeOID: 25, TypeMod: -1, Key: true, NotNull: true},
		{Name: "i2", TypeOID: 21, TypeMod: -1},
		{Name: "i4", TypeOID: 23, TypeMod: -1, NotNull: true},
		{Name: "o", TypeOID: 26, TypeMod: -1},
		{Name: "f4", TypeOID: 700, TypeMod: -1},
		{Name: "f8", TypeOID: 701, TypeMod: -1},
		{Name: "price", TypeOID: 1700, TypeMod: numericMod(12, 2)},
		{Name: "big", TypeOID: 1700, TypeMod: -1},
		{Name: "txt", TypeOID: 25, TypeMod: -1},
		{Name: "vc", TypeOID: 1043, TypeMod: 24},
		{Name: "bp", TypeOID: 1042, TypeMod: 9},
		{Name: "ch", TypeOID: 18, TypeMod: -1},
		{Name: "nm", TypeOID: 19, TypeMod: -1},
		{Name: "js", TypeOID: 114, TypeMod: -1},
		{Name: "jsb", TypeOID: 3802, TypeMod: -1},
		{Name: "raw", TypeOID: 17, TypeMod: -1},
		{Name: "flag", TypeOID: 16, TypeMod: -1},
		{Name: "uid", TypeOID: 2950, TypeMod: -1},
		{Name: "day", TypeOID: 1082, TypeMod: -1},
		{Name: "at", TypeOID: 1114, TypeMod: -1},
		{Name: "attz", TypeOID: 1184, TypeMod: -1, NotNull: true},
		{Name: "tod", TypeOID: 1083, TypeMod: -1},
		{Name: "tags", TypeOID: 1009, ElemOID: 25, TypeMod: -1, NotNull: true},
		{Name: "scores", TypeOID: 1007, ElemOID: 23, TypeMod: -1},
		{Name: "mood", TypeOID: 90001, TypeMod: -1, Enum: true},
		{Name: "span", TypeOID: 1186, TypeMod: -1},
		{Name: "as text", TypeOID: 1700, TypeMod: numericMod(5, 1), Text: true},
		{Name: "we`i\"rd\nnamé", TypeOID: 25, TypeMod: -1},
		{Name: "ip", TypeOID: 869, TypeMod: -1},
		{Name: "net", TypeOID: 650, TypeMod: -1},
		{Name: "mac", TypeOID: 829, TypeMod: -1},
		{Name: "mac8", TypeOID: 774, TypeMod: -1},
		{Name: "cash", TypeOID: 790, TypeMod: -1},
		{Name: "bits", TypeOID: 1560, TypeMod: 8},
		{Name: "vbits", TypeOID: 1562, TypeMod: -1},
		{Name: "doc", TypeOID: 3614, TypeMod: -1},
		{Name: "query", TypeOID: 3615, TypeMod: -1},
		{Name: "x", TypeOID: 142, TypeMod: -1},
		{Name: "todtz", TypeOID: 1266, TypeMod: -1},
		{Name: "lsn", TypeOID: 3220, TypeMod: -1},
		{Name: "r4", TypeOID: 3904, TypeMod: -1},
		{Name: "r8", TypeOID: 3926, TypeMod: -1},
		{Name: "rnum", TypeOID: 3906, TypeMod: -1},
		{Name: "rts", TypeOID: 3908, TypeMod: -1},
		{Name: "rtstz", TypeOID: 3910, TypeMod: -1},
		{Name: "rdate", TypeOID: 3912, TypeMod: -1},
		{Name: "mr4", TypeOID: 4451, TypeMod: -1},
		{Name: "pt", TypeOID: 600, TypeMod: -1},
		{Name: "ln", TypeOID: 628, TypeMod: -1},
		{Name: "seg", TypeOID: 601, TypeMod: -1},
		{Name: "bx", TypeOID: 603, TypeMod: -1},
		{Name: "pth", TypeOID: 602, TypeMod: -1},
		{Name: "poly", TypeOID: 604, TypeMod: -1},
		{Name: "circ", TypeOID: 718, TypeMod: -1},
		{Name: "snap", TypeOID: 5038, TypeMod: -1},
		{Name: "rel", TypeOID: 2205, TypeMod: -1},
		{Name: "xid", TypeOID: 28, TypeMod: -1},
		{Name: "xid8", TypeOID: 5069, TypeMod: -1},
		{Name: "ci", TypeOID: 16390, TypeMod: -1, TypeName: "citext", TypeBaseName: "citext", NotNull: true},
		{Name: "kv", TypeOID: 16400, TypeMod: -1, TypeName: "public.hstore", TypeBaseName: "hstore"},
		{Name: "geom", TypeOID: 16500, TypeMod: 1107460, TypeName: "geometry(Point,4326)", TypeBaseName: "geometry"},
		{Name: "geog", TypeOID: 16600, TypeMod: -1, TypeName: "geography", TypeBaseName: "geography"},
		{Name: "grid", TypeOID: 1007, ElemOID: 23, Dims: 2, TypeMod: -1, NotNull: true},
		{Name: "spans", TypeOID: 1187, ElemOID: 1186, Dims: 1, TypeMod: -1, NotNull: true},
		{Name: "infinite day", TypeOID: 1082, TypeMod: -1, NotNull: true},
		{Name: "unknown", TypeOID: 16700, TypeMod: -1, TypeName: "my_composite", TypeBaseName: "my_composite"},
	}}
}

// appendOnlyTable is an append-only table without a key.
func appendOnlyTable() Table {
	return Table{Schema: "public", Name: "events", AppendOnly: true, Columns: []Column{
		{Name: "at", TypeOID: 1184, TypeMod: -1, NotNull: true},
		{Name: "payload", TypeOID: 3802, TypeMod: -1},
	}}
}

// render is what a golden file holds for a table map.
func render(m *TableMap) string {
	var b strings.Builder
	b.WriteString(m.CreateTableDDL("ferry db") + "\n\n")
	b.WriteString(m.InsertSQL("ferry db") + "\n\n")
	b.WriteString("SELECT " + m.SelectColumnsSQL() + "\n\n")
	for _, c := range m.Columns {
		fmt.Fprintf(&b, "%s\t%s\tnullable=%v fallback=%v\n", QuoteCH(c.Name), c.Type, c.Nullable, c.Fallback)
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	tests := []struct {
		file  string
		table Table
		caps  Capabilities
	}{
		{"modern.golden", everyType(), CapabilitiesFor(24, 8)},
		{"old.golden", everyType(), CapabilitiesFor(18, 16)},
		{"ch23_8.golden", everyType(), CapabilitiesFor(23, 8)},
		{"ch25_3.golden", everyType(), CapabilitiesFor(25, 3)},
		{"ch22_3.golden", everyType(), CapabilitiesFor(22, 3)},
		{"append_only.golden", appendOnlyTable(), CapabilitiesFor(24, 8)},
		{"append_only_old.golden", appendOnlyTable(), CapabilitiesFor(18, 16)},
		{"full_row.golden", fullRowTable(), CapabilitiesFor(24, 8)},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			m, err := Map(tt.table, tt.caps)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.file, render(m))
		})
	}
}

func TestDDLShape(t *testing.T) {
	tests := []struct {
		name  string
		table Table
	}{
		{"keyed", everyType()},
		{"append-only", appendOnlyTable()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Map(tt.table, CapabilitiesFor(24, 8))
			if err != nil {
				t.Fatal(err)
			}
			ddl := m.CreateTableDDL("db")
			if strings.Contains(ddl, ";") {
				t.Errorf("DDL holds a semicolon:\n%s", ddl)
			}
			for _, i := range m.Key {
				if m.Columns[i].Nullable {
					t.Errorf("key column %s is Nullable", m.Columns[i].Name)
				}
			}
			wantCols := len(m.Columns) + 2
			if tt.table.AppendOnly {
				wantCols++
			}
			if n := strings.Count(m.InsertSQL("db"), ", ") + 1; n != wantCols {
				t.Errorf("InsertSQL has %d columns, want %d", n, wantCols)
			}
		})
	}
}

// fullRowTable has REPLICA IDENTITY FULL and no key.
func fullRowTable() Table {
	return Table{Schema: "public", Name: "readings", FullRow: true, Columns: []Column{
		{Name: "sensor", TypeOID: 25, TypeMod: -1, TypeName: "text"},
		{Name: "value", TypeOID: 701, TypeMod: -1, TypeName: "double precision"},
	}}
}

// checkGolden compares got with testdata/file, rewriting the file first
// with -update.
func checkGolden(t *testing.T, file, got string) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run go test -update after checking):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
