package verify

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ferry-cdc/ferry/schema"
)

// rows is an in-memory table side.
func rows(r ...[]any) Scanner {
	return func(_ context.Context, _ *schema.TableMap, fn func([]any) error) error {
		for _, v := range r {
			if err := fn(v); err != nil {
				return err
			}
		}
		return nil
	}
}

// columns is rows as the destination is read: only the columns asked for.
func columns(r ...[]any) ColumnScanner {
	return func(_ context.Context, _ *schema.TableMap, cols []int, fn func([]any) error) error {
		for _, v := range r {
			vals := make([]any, len(cols))
			for i, c := range cols {
				vals[i] = v[c]
			}
			if err := fn(vals); err != nil {
				return err
			}
		}
		return nil
	}
}

func table(t *testing.T) *schema.TableMap {
	t.Helper()
	tm, err := schema.Map(schema.Table{Schema: "public", Name: "t", Columns: []schema.Column{
		{Name: "id", TypeOID: 20, TypeMod: -1, Key: true},
		{Name: "v", TypeOID: 25, TypeMod: -1},
		{Name: "w", TypeOID: 20, TypeMod: -1},
	}}, schema.Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestTable(t *testing.T) {
	tm := table(t)
	base := [][]any{{int64(1), "a", int64(10)}, {int64(2), nil, int64(20)}, {int64(3), "c", nil}}
	for _, c := range []struct {
		name  string
		dest  [][]any
		match bool
		want  []string // substrings of the differences, in order
	}{
		{"same rows in another order", [][]any{base[2], base[0], base[1]}, true, nil},
		{"a value differs", [][]any{base[0], {int64(2), "", int64(20)}, base[2]}, false, []string{`(id="2"): PostgreSQL (id="2", v="\\N", w="20"), ClickHouse (id="2", v="", w="20")`}},
		{"a value of the last group differs", [][]any{base[0], base[1], {int64(3), "c", int64(0)}}, false, []string{`(id="3"): PostgreSQL (id="3", v="c", w="\\N"), ClickHouse (id="3", v="c", w="0")`}},
		{"a row is missing", [][]any{base[0], base[2]}, false, []string{`(id="2"): missing from ClickHouse`}},
		{"an extra row", append(append([][]any{}, base...), []any{int64(9), "x", nil}), false, []string{`(id="9"): only in ClickHouse`}},
	} {
		// One column per scan reads the destination in two groups, v and
		// w; the result must be the same as from one scan of all.
		for _, width := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s, %d columns a scan", c.name, width), func(t *testing.T) {
				res, err := Table(context.Background(), tm, rows(base...), columns(c.dest...), Config{Buckets: 4, DestColumns: width})
				if err != nil {
					t.Fatal(err)
				}
				if res.Match != c.match || res.SourceRows != 3 || res.DestRows != uint64(len(c.dest)) {
					t.Fatalf("got match=%v rows %d/%d, want match=%v 3/%d", res.Match, res.SourceRows, res.DestRows, c.match, len(c.dest))
				}
				if len(res.Differences) != len(c.want) {
					t.Fatalf("got differences %v, want %d", res.Differences, len(c.want))
				}
				for i, w := range c.want {
					if got := res.Differences[i].String(); !strings.Contains(got, w) {
						t.Errorf("difference %d: got %q, want it to contain %q", i, got, w)
					}
				}
			})
		}
	}
}

// TestEncodingIsUnambiguous checks that values cannot run into each other:
// ("ab", "c") and ("a", "bc") must not hash alike.
func TestEncodingIsUnambiguous(t *testing.T) {
	tm, err := schema.Map(schema.Table{Schema: "public", Name: "t", AppendOnly: true, Columns: []schema.Column{
		{Name: "a", TypeOID: 25, TypeMod: -1}, {Name: "b", TypeOID: 25, TypeMod: -1},
	}}, schema.Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Table(context.Background(), tm, rows([]any{"ab", "c"}), columns([]any{"a", "bc"}), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Match {
		t.Fatal(`("ab","c") and ("a","bc") compared equal`)
	}
}
