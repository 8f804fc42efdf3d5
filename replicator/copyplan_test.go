package replicator

import (
	"fmt"
	"testing"
)

func TestSplitPages(t *testing.T) {
	for _, tc := range []struct {
		pages uint32
		parts int
		want  string
	}{
		{0, 4, "[{0 0}]"},
		{minRangePages*2 - 1, 4, "[{0 0}]"},                       // too small for two ranges
		{minRangePages * 2, 1, "[{0 0}]"},                         // one worker
		{minRangePages * 2, 4, "[{0 1024} {1024 0}]"},             // as many as the size allows
		{10000, 4, "[{0 2500} {2500 5000} {5000 7500} {7500 0}]"}, // the last one is open
		{10001, 3, "[{0 3333} {3333 6666} {6666 0}]"},
	} {
		t.Run(fmt.Sprint(tc.pages, "/", tc.parts), func(t *testing.T) {
			got := splitPages(tc.pages, tc.parts)
			if fmt.Sprint(got) != tc.want {
				t.Errorf("splitPages(%d, %d) = %v, want %s", tc.pages, tc.parts, got, tc.want)
			}
			// Consecutive ranges meet, the first has no lower bound and the
			// last no upper one: every page is read exactly once.
			if got[0].from != 0 || got[len(got)-1].to != 0 {
				t.Errorf("ends %v are bounded", got)
			}
			for i := 1; i < len(got); i++ {
				if got[i].from != got[i-1].to {
					t.Errorf("range %d starts at %d, the one before ends at %d", i, got[i].from, got[i-1].to)
				}
			}
		})
	}
}

func TestPageRangeWhere(t *testing.T) {
	for _, tc := range []struct {
		r    pageRange
		want string
	}{
		{pageRange{}, ""},
		{pageRange{0, 7}, " WHERE ctid < '(7,0)'::tid"},
		{pageRange{7, 0}, " WHERE ctid >= '(7,0)'::tid"},
		{pageRange{7, 9}, " WHERE ctid >= '(7,0)'::tid AND ctid < '(9,0)'::tid"},
	} {
		if got := tc.r.where(); got != tc.want {
			t.Errorf("%v.where() = %q, want %q", tc.r, got, tc.want)
		}
	}
}

func TestValueSlab(t *testing.T) {
	var s valueSlab
	seen := map[*any]bool{}
	first := 0
	for round := 0; round < 2; round++ {
		for i := 0; i < slabChunk; i++ { // 3 values a row: rows straddle chunks
			v := s.next(3)
			if len(v) != 3 || cap(v) != 3 {
				t.Fatalf("row %d: len %d cap %d, want 3 and 3 (an append must not reach the next row)", i, len(v), cap(v))
			}
			for j := range v {
				if round == 0 && seen[&v[j]] {
					t.Fatalf("row %d: value %d handed out twice before a reset", i, j)
				}
				seen[&v[j]] = true
			}
		}
		s.reset()
		if round == 0 {
			first = len(s.chunks)
		} else if len(s.chunks) != first {
			t.Errorf("after a reset the slab grew from %d to %d chunks, want the first round's reused", first, len(s.chunks))
		}
	}
}
