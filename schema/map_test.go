package schema

import (
	"fmt"
	"strings"
	"testing"
)

// numericMod is the typmod of numeric(p, s).
func numericMod(p, s int) int32 { return int32(p<<16|(s&0x7ff)) + 4 }

func TestMapTypes(t *testing.T) {
	modern, old := CapabilitiesFor(24, 8), CapabilitiesFor(18, 16)
	tests := []struct {
		name     string
		col      Column
		caps     Capabilities
		want     string
		fallback bool
	}{
		{"int2", Column{TypeOID: 21}, modern, "Nullable(Int16)", false},
		{"int4 not null", Column{TypeOID: 23, NotNull: true}, modern, "Int32", false},
		{"int8 key", Column{TypeOID: 20, Key: true}, modern, "Int64", false},
		{"oid", Column{TypeOID: 26, NotNull: true}, modern, "UInt32", false},
		{"float4", Column{TypeOID: 700, NotNull: true}, modern, "Float32", false},
		{"float8", Column{TypeOID: 701, NotNull: true}, modern, "Float64", false},
		{"numeric(10,2)", Column{TypeOID: 1700, TypeMod: numericMod(10, 2), NotNull: true}, modern, "Decimal(10, 2)", false},
		{"numeric(38,0)", Column{TypeOID: 1700, TypeMod: numericMod(38, 0), NotNull: true}, old, "Decimal(38, 0)", false},
		{"numeric(39,2) without Decimal256", Column{TypeOID: 1700, TypeMod: numericMod(39, 2), NotNull: true}, old, "String", false},
		{"numeric(39,2)", Column{TypeOID: 1700, TypeMod: numericMod(39, 2), NotNull: true}, modern, "Decimal(39, 2)", false},
		{"numeric(76,76)", Column{TypeOID: 1700, TypeMod: numericMod(76, 76), NotNull: true}, modern, "Decimal(76, 76)", false},
		{"numeric(77,0)", Column{TypeOID: 1700, TypeMod: numericMod(77, 0), NotNull: true}, modern, "String", false},
		{"numeric(50,2)[]", Column{TypeOID: 1231, ElemOID: 1700, TypeMod: numericMod(50, 2), NotNull: true}, modern, "Array(Nullable(Decimal(50, 2)))", false},
		{"numeric unconstrained", Column{TypeOID: 1700, TypeMod: -1}, modern, "Nullable(String)", false},
		{"numeric(5,-2)", Column{TypeOID: 1700, TypeMod: numericMod(5, -2), NotNull: true}, modern, "String", false},
		{"numeric(2,5)", Column{TypeOID: 1700, TypeMod: numericMod(2, 5), NotNull: true}, modern, "String", false},
		{"text", Column{TypeOID: 25}, modern, "Nullable(String)", false},
		{"varchar", Column{TypeOID: 1043, TypeMod: 14, NotNull: true}, modern, "String", false},
		{"bpchar", Column{TypeOID: 1042, NotNull: true}, modern, "String", false},
		{"char", Column{TypeOID: 18, NotNull: true}, modern, "String", false},
		{"name", Column{TypeOID: 19, NotNull: true}, modern, "String", false},
		{"json", Column{TypeOID: 114, NotNull: true}, modern, "String", false},
		{"jsonb", Column{TypeOID: 3802, NotNull: true}, modern, "String", false},
		{"bytea", Column{TypeOID: 17, NotNull: true}, modern, "String", false},
		{"bool modern", Column{TypeOID: 16, NotNull: true}, modern, "Bool", false},
		{"bool old", Column{TypeOID: 16, NotNull: true}, old, "UInt8", false},
		{"uuid", Column{TypeOID: 2950, NotNull: true}, modern, "UUID", false},
		{"date modern", Column{TypeOID: 1082}, modern, "Nullable(Date32)", false},
		{"date old", Column{TypeOID: 1082}, old, "Nullable(Int32)", false},
		{"date 21.8", Column{TypeOID: 1082, NotNull: true}, CapabilitiesFor(21, 8), "Int32", false},
		{"timestamp modern", Column{TypeOID: 1114, NotNull: true}, modern, "DateTime64(6, 'UTC')", false},
		{"timestamptz modern", Column{TypeOID: 1184}, modern, "Nullable(DateTime64(6, 'UTC'))", false},
		{"timestamp old", Column{TypeOID: 1114, NotNull: true}, old, "Int64", false},
		{"time", Column{TypeOID: 1083, NotNull: true}, modern, "Int64", false},
		{"interval", Column{TypeOID: 1186}, modern, "Nullable(String)", false},
		{"inet key", Column{TypeOID: 869, Key: true}, modern, "String", false},
		{"unknown type", Column{TypeOID: 90010}, modern, "Nullable(String)", true},
		{"unknown type key", Column{TypeOID: 90010, Key: true}, old, "String", true},
		{"enum modern", Column{TypeOID: 90001, Enum: true}, modern, "LowCardinality(Nullable(String))", false},
		{"enum modern not null", Column{TypeOID: 90001, Enum: true, NotNull: true}, modern, "LowCardinality(String)", false},
		{"enum old", Column{TypeOID: 90001, Enum: true}, old, "Nullable(String)", false},
		{"text override", Column{TypeOID: 1700, TypeMod: numericMod(10, 2), Text: true}, modern, "Nullable(String)", false},
		{"text override key", Column{TypeOID: 1114, Text: true, Key: true}, modern, "String", false},
		{"int4[] not null", Column{TypeOID: 1007, ElemOID: 23, NotNull: true}, modern, "Array(Nullable(Int32))", false},
		{"int4[] nullable", Column{TypeOID: 1007, ElemOID: 23}, modern, "Nullable(String)", false},
		{"numeric(5,1)[]", Column{TypeOID: 1231, ElemOID: 1700, TypeMod: numericMod(5, 1), NotNull: true}, modern, "Array(Nullable(Decimal(5, 1)))", false},
		{"date[] old", Column{TypeOID: 1182, ElemOID: 1082, NotNull: true}, old, "Array(Nullable(Int32))", false},
		{"enum[]", Column{TypeOID: 90002, ElemOID: 90001, Enum: true, NotNull: true}, modern, "Array(Nullable(String))", false},
		{"interval[]", Column{TypeOID: 1187, ElemOID: 1186, NotNull: true}, modern, "Array(Nullable(String))", false},
		{"interval[] nullable", Column{TypeOID: 1187, ElemOID: 1186}, modern, "Nullable(String)", false},
		{"unknown[]", Column{TypeOID: 90011, ElemOID: 90010, NotNull: true}, modern, "String", true},
		{"unknown[] nullable", Column{TypeOID: 90011, ElemOID: 90010}, modern, "Nullable(String)", true},
		{"int4[][] not null", Column{TypeOID: 1007, ElemOID: 23, Dims: 2, NotNull: true}, modern, "String", false},
		{"int4[][] nullable", Column{TypeOID: 1007, ElemOID: 23, Dims: 2}, old, "Nullable(String)", false},
		{"int4[][][] key", Column{TypeOID: 1007, ElemOID: 23, Dims: 3, Key: true}, modern, "String", false},
		{"int4[] dims 1", Column{TypeOID: 1007, ElemOID: 23, Dims: 1, NotNull: true}, modern, "Array(Nullable(Int32))", false},
		{"unknown[][]", Column{TypeOID: 90011, ElemOID: 90010, Dims: 2, NotNull: true}, modern, "String", true},
		{"citext[]", Column{TypeOID: 90021, ElemOID: 90020, TypeBaseName: "citext", NotNull: true}, modern, "String", false},
		{"date 22.7", Column{TypeOID: 1082, NotNull: true}, CapabilitiesFor(22, 7), "Int32", false},
		{"timestamp 22.7", Column{TypeOID: 1114, NotNull: true}, CapabilitiesFor(22, 7), "Int64", false},
		{"date 22.8", Column{TypeOID: 1082, NotNull: true}, CapabilitiesFor(22, 8), "Date32", false},
		{"timestamp 22.8", Column{TypeOID: 1114, NotNull: true}, CapabilitiesFor(22, 8), "DateTime64(6, 'UTC')", false},
		{"int4[] key", Column{TypeOID: 1007, ElemOID: 23, Key: true}, modern, "String", false},
		{"int4[] text", Column{TypeOID: 1007, ElemOID: 23, NotNull: true, Text: true}, modern, "String", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.col.Name = "c"
			m, err := Map(Table{Schema: "public", Name: "t", Columns: []Column{tt.col}, AppendOnly: true}, tt.caps)
			if err != nil {
				t.Fatal(err)
			}
			c := m.Columns[0]
			if c.Type != tt.want || c.Fallback != tt.fallback {
				t.Errorf("got %s (fallback %v), want %s (fallback %v)", c.Type, c.Fallback, tt.want, tt.fallback)
			}
			top := strings.HasPrefix(c.Type, "Nullable(") || strings.HasPrefix(c.Type, "LowCardinality(Nullable(")
			if c.Nullable != top {
				t.Errorf("Nullable = %v for %s", c.Nullable, c.Type)
			}
		})
	}
}

func TestMapTable(t *testing.T) {
	cols := []Column{
		{Name: "b", TypeOID: 25},
		{Name: "a", TypeOID: 23, Key: true},
		{Name: "c", TypeOID: 20, Key: true},
	}
	tests := []struct {
		name    string
		table   Table
		wantKey []int
		wantErr string
	}{
		{"keyed", Table{Schema: "public", Name: "t", Columns: cols}, []int{1, 2}, ""},
		{"append-only ignores key", Table{Schema: "s", Name: "t", Columns: cols, AppendOnly: true}, nil, ""},
		{"append-only without key", Table{Schema: "s", Name: "t", Columns: cols[:1], AppendOnly: true}, nil, ""},
		{"no columns", Table{Schema: "s", Name: "t"}, nil, `table "s"."t" has no columns`},
		{"no key", Table{Schema: "s", Name: "t", Columns: cols[:1]}, nil, `table "s"."t" has no key column; fix: add a primary key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Map(tt.table, CapabilitiesFor(24, 8))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Key) != len(tt.wantKey) {
				t.Fatalf("Key = %v, want %v", m.Key, tt.wantKey)
			}
			for i := range m.Key {
				if m.Key[i] != tt.wantKey[i] {
					t.Fatalf("Key = %v, want %v", m.Key, tt.wantKey)
				}
			}
			if want := CHTableName(tt.table.Schema, tt.table.Name); m.Name != want {
				t.Errorf("Name = %q, want %q", m.Name, want)
			}
		})
	}
}

func TestNumericTypmod(t *testing.T) {
	tests := []struct {
		typmod int32
		p, s   int
		ok     bool
	}{
		{-1, 0, 0, false},
		{numericMod(10, 2), 10, 2, true},
		{numericMod(1000, 0), 1000, 0, true},
		{numericMod(5, -2), 5, -2, true},
		{numericMod(3, -1000), 3, -1000, true},
		{numericMod(2, 1000), 2, 1000, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.typmod), func(t *testing.T) {
			p, s, ok := numericTypmod(tt.typmod)
			if p != tt.p || s != tt.s || ok != tt.ok {
				t.Errorf("numericTypmod(%d) = %d, %d, %v; want %d, %d, %v", tt.typmod, p, s, ok, tt.p, tt.s, tt.ok)
			}
		})
	}
}
