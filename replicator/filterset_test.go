package replicator

import (
	"strings"
	"testing"
)

func TestFilterSet(t *testing.T) {
	set, err := filterSet([]string{"public.t.b", "t.a", `s."odd.name".c`}, []string{`public.t:WHERE a IN (1, 2)`, `"s"."odd.name":where(x = ':')`, "u:  b > 1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ table, exclude, where string }{
		{"public.t", "a,b", "a IN (1, 2)"},
		{"s.odd.name", "c", "(x = ':')"},
		{"public.u", "", "b > 1"},
	} {
		f := set[c.table]
		if f == nil {
			t.Errorf("%s: no filter", c.table)
			continue
		}
		if got := strings.Join(f.exclude, ","); got != c.exclude || f.where != c.where {
			t.Errorf("%s: exclude %q where %q, want %q and %q", c.table, got, f.where, c.exclude, c.where)
		}
	}
	for _, bad := range [][2][]string{
		{{"t"}, nil},
		{nil, {"public.t WHERE a > 1"}},
		{nil, {"public.t:WHERE "}},
		{nil, {"t:a > 1", "public.t:b > 1"}},
	} {
		if _, err := filterSet(bad[0], bad[1]); err == nil {
			t.Errorf("filterSet(%q, %q) took it", bad[0], bad[1])
		}
	}
}

func TestCopySQLFilter(t *testing.T) {
	ref := tableRef{Schema: "public", Name: "t"}
	for _, c := range []struct {
		rng   pageRange
		where string
		want  string
	}{
		{pageRange{}, "", `COPY (SELECT "a" FROM "public"."t") TO STDOUT`},
		{pageRange{}, "a > 1", `COPY (SELECT "a" FROM "public"."t" WHERE (a > 1)) TO STDOUT`},
		{pageRange{from: 5, to: 9}, "a > 1 OR a < 0", `COPY (SELECT "a" FROM "public"."t" WHERE (a > 1 OR a < 0) AND ctid >= '(5,0)'::tid AND ctid < '(9,0)'::tid) TO STDOUT`},
		{pageRange{to: 9}, "", `COPY (SELECT "a" FROM "public"."t" WHERE ctid < '(9,0)'::tid) TO STDOUT`},
	} {
		if got := copySQL(ref, []string{"a"}, c.rng, c.where, false); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

func TestFilterServerGate(t *testing.T) {
	for _, c := range []struct {
		major int
		ok    bool
	}{{13, false}, {14, false}, {15, true}, {17, true}, {0, true}} {
		err := checkFilterServer(c.major)
		if (err == nil) != c.ok {
			t.Errorf("PostgreSQL %d: %v", c.major, err)
		}
		if err != nil && !strings.Contains(err.Error(), "PostgreSQL 15 or later") {
			t.Errorf("PostgreSQL %d: the error does not say what is needed: %v", c.major, err)
		}
	}
}
