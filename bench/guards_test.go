package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWindowGuards(t *testing.T) {
	names := func(cs []Check) (failed []string) {
		for _, c := range cs {
			if !c.Passed {
				failed = append(failed, c.Name+": "+c.Detail)
			}
		}
		return failed
	}
	cases := []struct {
		name                string
		c0, cEnd, cAfter    int64
		redo                []int64
		autovac             []string
		ownAutovac          int64
		wantCkpt, wantAutov bool
	}{
		{name: "quiet", c0: 5, cEnd: 5, cAfter: 6},
		{name: "spread checkpoint published in the window", c0: 5, cEnd: 6, cAfter: 7, wantCkpt: true},
		{name: "checkpoint record in the window", c0: 5, cEnd: 5, cAfter: 6, redo: []int64{1500}, wantCkpt: true},
		{name: "checkpoint record of an earlier redo", c0: 5, cEnd: 5, cAfter: 6, redo: []int64{500}},
		{name: "checkpoint finished before ours", c0: 5, cEnd: 5, cAfter: 7, wantCkpt: true},
		{name: "autovacuum elsewhere", c0: 5, cEnd: 5, cAfter: 6, autovac: []string{"db: autovacuum: VACUUM t"}, wantAutov: true},
		{name: "autovacuum on the table", c0: 5, cEnd: 5, cAfter: 6, ownAutovac: 1, wantAutov: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := windowGuards(1, 1000, c.c0, c.cEnd, c.cAfter, true, c.redo, c.autovac, c.ownAutovac)
			failed := strings.Join(names(got), "; ")
			if strings.Contains(failed, guardCheckpoint) != c.wantCkpt || strings.Contains(failed, guardAutovacuum) != c.wantAutov {
				t.Errorf("failed guards %q, want checkpoint %v autovacuum %v", failed, c.wantCkpt, c.wantAutov)
			}
		})
	}
}

func TestJudgeDiscardsOrMarksDisturbedRuns(t *testing.T) {
	mk := func() RunResult {
		return RunResult{Run: 1, Checks: []Check{{Name: "exact row count", Passed: true},
			{Name: guardCheckpoint, Detail: "1 checkpoints started in the window"}}}
	}
	r := mk()
	r.judge(false)
	if r.Kept || len(r.Disturbed) != 1 {
		t.Errorf("discard: kept %v disturbed %q", r.Kept, r.Disturbed)
	}
	r = mk()
	r.judge(true)
	if !r.Kept || len(r.Disturbed) != 1 || !strings.Contains(r.Disturbed[0], "1 checkpoints") {
		t.Errorf("keep and mark: kept %v disturbed %q", r.Kept, r.Disturbed)
	}
	r = mk()
	r.Checks[0].Passed = false
	r.judge(true)
	if r.Kept {
		t.Error("a failed sanity check must discard even with keepDisturbed")
	}
	e := summarize(Strategy{Name: "x"}, "insert", 1, 90, []RunResult{func() RunResult { r := mk(); r.judge(true); r.TPS = 1; return r }()})
	if e.N != 1 || len(e.Disturbed) != 1 || !e.Sanity.Passed {
		t.Errorf("entry of a kept disturbed run: n %d disturbed %v sanity %v", e.N, e.Disturbed, e.Sanity.Passed)
	}
}

func TestParseDump(t *testing.T) {
	dump := `rmgr: Btree       len (rec/tot):     53/  5053, tx:        839, lsn: 0/0200A948, prev 0/0200A870, desc: INSERT_LEAF off 248, blkref #0: rel 1663/5/2703 blk 2 FPW
rmgr: Heap        len (rec/tot):     54/    54, tx:        840, lsn: 0/0200BD08, prev 0/0200A948, desc: INSERT off 3 flags 0x00, blkref #0: rel 1663/7/16400 blk 9
rmgr: Btree       len (rec/tot):     64/  8000, tx:        840, lsn: 0/0200BD40, prev 0/0200BD08, desc: SPLIT_L level 0, firstrightoff 3, blkref #0: rel 1663/7/16401 blk 4 FPW, blkref #1: rel 1663/7/16401 blk 5, blkref #2: rel 1663/7/16401 blk 6 FPW
rmgr: Transaction len (rec/tot):     34/    34, tx:        839, lsn: 0/0200D6D8, prev 0/0200BD40, desc: COMMIT 2026-12-01 22:25:55.101489 UTC
rmgr: Transaction len (rec/tot):     34/    34, tx:        840, lsn: 0/0200D700, prev 0/0200D6D8, desc: COMMIT 2026-12-01 22:25:55.101489 UTC
rmgr: XLOG        len (rec/tot):    114/   114, tx:          0, lsn: 0/0200D728, prev 0/0200D700, desc: CHECKPOINT_ONLINE redo 0/200A800; tli 1; prev tli 1; fpw true
`
	st, err := parseDump(strings.NewReader(dump), 7)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != 6 || st.RecordBytes != 5053+54+8000+34+34+114 || st.FPI != 3 || st.FPIBytes != 5000+7936 {
		t.Errorf("records %d bytes %d fpi %d fpi bytes %d", st.Records, st.RecordBytes, st.FPI, st.FPIBytes)
	}
	if st.ForeignBytes != 5053+34 || st.ForeignFPI != 1 {
		t.Errorf("foreign bytes %d fpi %d: want database 5's insert and its commit", st.ForeignBytes, st.ForeignFPI)
	}
	if len(st.CheckpointRedo) != 1 || lsnText(st.CheckpointRedo[0]) != "0/200A800" {
		t.Errorf("checkpoint redo %v", st.CheckpointRedo)
	}
}

func TestHottestCountsLeavesAndScalesTheEdge(t *testing.T) {
	s := &sampler{blocks: map[blockKey]*HotBlock{
		{1, 3}:    {Block: 3, Pins: 100, MaxBlock: 5000}, // the root
		{1, 4990}: {Block: 4990, Pins: 30, MaxBlock: 5000},
		{1, 4960}: {Block: 4960, Pins: 30, MaxBlock: 5000}, // 40 from the end: within 1% of 5001 blocks
		{1, 2000}: {Block: 2000, Pins: 40, MaxBlock: 5000},
		{2, 40}:   {Block: 40, Pins: 5, MaxBlock: 60}, // 20 from the end of a 61-block index: outside its edge of 4
	}}
	hot, share := s.hottest(2, func(i uint32, b int64) bool { return !(i == 1 && b == 3) })
	if len(hot) != 2 || hot[0].Block != 2000 || hot[1].Block != 4990 {
		t.Errorf("hottest %+v: want leaves 2000 and 4990, not the root", hot)
	}
	if want := 60.0 / 105; share < want-1e-9 || share > want+1e-9 {
		t.Errorf("right-edge share %v, want %v", share, want)
	}
	if rightEdge(60) != rightEdgeMinBlocks || rightEdge(9999) != 100 {
		t.Errorf("right edge of 61 blocks %d, of 10000 blocks %d", rightEdge(60), rightEdge(9999))
	}
}

// TestWALReaderSaysWhyNot: without a usable pg_waldump the benchmark
// falls back to pg_stat_wal, and the reason names what is missing.
func TestWALReaderSaysWhyNot(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "pg_waldump")
	if err := os.WriteFile(old, []byte("#!/bin/sh\necho 'pg_waldump (PostgreSQL) 9.6.24'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ bin, want string }{
		{"", "no pg_waldump"},
		{filepath.Join(dir, "missing"), "--version"},
		{old, "is from PostgreSQL 9, the server is 15"},
	} {
		w, why := openWALReader(context.Background(), nil, c.bin, 150018)
		if w != nil || !strings.Contains(why, c.want) {
			t.Errorf("%q: reader %v, reason %q, want it to say %q", c.bin, w, why, c.want)
		}
	}
}
