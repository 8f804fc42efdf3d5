package replicator

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestCopyCut(t *testing.T) {
	c, err := parseCut("4294967390:4294967400:4294967395,4294967398")
	if err != nil {
		t.Fatal(err)
	}
	c.End = 1000
	if c.Xmax != 104 || len(c.Xip) != 2 || c.Xip[0] != 99 || c.Xip[1] != 102 {
		t.Fatalf("parsed %+v: want 32-bit xmax 104 and xip [99 102]", c)
	}
	for _, tt := range []struct {
		xid    uint32
		commit pglogrepl.LSN
		want   bool
	}{
		{90, 500, true},         // ended before the snapshot (below xmin)
		{100, 999, true},        // ended before it, between xmin and xmax
		{99, 999, false},        // running when it was taken
		{104, 999, false},       // began after it
		{110, 1500, false},      // commits past End
		{100, 1000, false},      // at End: not held, whatever its id
		{0xfffffff0, 999, true}, // before an xmax past the wraparound
		{3, 999, false},         // after an xmax just before it, once it wrapped
	} {
		cut := c
		if tt.xid >= 0xfffffff0 {
			cut = &copyCut{End: 1000, Xmax: 5}
		} else if tt.xid == 3 {
			cut = &copyCut{End: 1000, Xmax: 0xfffffff0}
		}
		if got := cut.holds(tt.xid, tt.commit); got != tt.want {
			t.Errorf("holds(%d, %d) = %v, want %v", tt.xid, tt.commit, got, tt.want)
		}
	}
	if (*copyCut)(nil).holds(1, 1) {
		t.Error("no cut holds a transaction")
	}
	for _, bad := range []string{"", "1:2", "1:x:", "1:2:3,y"} {
		if _, err := parseCut(bad); err == nil {
			t.Errorf("parseCut(%q): no error", bad)
		}
	}
	if c, err := parseCut("5:5:"); err != nil || c.Xmax != 5 || len(c.Xip) != 0 {
		t.Errorf("parseCut(5:5:) = %+v, %v", c, err)
	}
}
