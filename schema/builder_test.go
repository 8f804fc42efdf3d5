package schema

import (
	"fmt"
	"reflect"
	"testing"
)

// TestBuilderBlock fills typed builders of a string and an int column with
// several values, takes some back and adds more, as the copy does around a
// refused row, and checks the typed slice against Convert value by value.
func TestBuilderBlock(t *testing.T) {
	var cols []ColumnMap
	for _, nullAsDefault := range []bool{true, false} { // NOT NULL columns; Nullable ones
		m, err := Map(Table{Schema: "public", Name: "t", NullAsDefault: nullAsDefault, Columns: []Column{
			{Name: "id", TypeOID: oidInt8, Key: true, NotNull: true},
			{Name: "s", TypeOID: oidText},
			{Name: "n", TypeOID: oidInt4},
		}}, Capabilities{})
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, m.Columns[1:]...)
	}
	for _, cm := range cols {
		b := cm.NewBuilder()
		var want []any
		add := func(text string, null bool) {
			t.Helper()
			if err := b.Append([]byte(text), null); err != nil {
				t.Fatal(err)
			}
			v, err := cm.Convert([]byte(text), null)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, v)
		}
		for round := range 3 {
			add("1", false)
			b.AppendZero()
			want = append(want, cm.Zero())
			add("", true) // NullAsDefault: the zero
			add(fmt.Sprint(100+round), false)
			if round == 1 {
				b.Truncate(b.Len() - 2)
				want = want[:len(want)-2]
			}
			typed, ok := b.Typed()
			if !ok {
				t.Fatalf("%s: not typed", cm.Type)
			}
			tv := reflect.ValueOf(typed)
			if tv.Len() != len(want) || b.Len() != len(want) {
				t.Fatalf("%s round %d: typed %d, Len %d, want %d values", cm.Type, round, tv.Len(), b.Len(), len(want))
			}
			for i := range want {
				e := tv.Index(i)
				if cm.Nullable { // []*T, nil for NULL
					if e.IsNil() {
						e = reflect.ValueOf((any)(nil))
					} else {
						e = e.Elem()
					}
				}
				var got any
				if e.IsValid() {
					got = e.Interface()
				}
				if got != want[i] || b.Value(i) != want[i] {
					t.Fatalf("%s round %d value %d: typed %#v, Value %#v, want %#v", cm.Type, round, i, got, b.Value(i), want[i])
				}
			}
			if round == 2 {
				kept := b.Value(3)
				b.Reset()
				if b.Len() != 0 {
					t.Fatalf("%s: Reset left %d values", cm.Type, b.Len())
				}
				add("999", false) // writes over the memory the values were in
				if kept != want[3] {
					t.Fatalf("%s: a value taken before Reset changed to %#v", cm.Type, kept)
				}
			}
		}
	}
}
