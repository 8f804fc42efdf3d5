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
