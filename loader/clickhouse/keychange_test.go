package clickhouse

import (
	"testing"

	"github.com/ferry-cdc/ferry/loader"
)

// TestUnchangedKeyChange: an update that changes the key arrives as the
// old key's deleted row followed by the new row, whose TOASTed values are
// Unchanged; they are the old key's, from ClickHouse or from an earlier row
// of the batch. (The chaos suite found this: ferry stopped at the first
// such update.)
func TestUnchangedKeyChange(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, kvTable("moved"))
	big1, big2 := randomText(50_000), randomText(50_000)
	write(t, s, tm, loader.Row{Values: conv(t, tm, "1", big1, "1"), Version: 1},
		loader.Row{Values: conv(t, tm, "2", big2, "1"), Version: 1})

	// Key 1 moves to 10: its value comes from ClickHouse. Key 2 is updated,
	// then moves to 20, then to 30: from the batch's earlier rows.
	write(t, s, tm,
		deleted(tm, 5, int64(1)), loader.Row{Values: conv(t, tm, "10", loader.Unchanged, "2"), Version: 5},
		loader.Row{Values: conv(t, tm, "2", "small", "2"), Version: 6},
		deleted(tm, 7, int64(2)), loader.Row{Values: conv(t, tm, "20", loader.Unchanged, "3"), Version: 7},
		deleted(tm, 8, int64(20)), loader.Row{Values: conv(t, tm, "30", loader.Unchanged, "4"), Version: 8})
	wantLive(t, s, tm, conv(t, tm, "10", big1, "2"), conv(t, tm, "30", "small", "4"))

	// A key that moves onto a key deleted earlier in the batch takes the
	// moved row's value, not the deleted one's.
	write(t, s, tm, deleted(tm, 9, int64(30)),
		deleted(tm, 10, int64(10)), loader.Row{Values: conv(t, tm, "30", loader.Unchanged, "5"), Version: 10})
	wantLive(t, s, tm, conv(t, tm, "30", big1, "5"))

	// An old key that ClickHouse does not hold is still an error.
	err := s.Write(ctxT(t), &loader.Batch{Table: tm, Rows: []loader.Row{
		deleted(tm, 11, int64(99)), {Values: conv(t, tm, "98", loader.Unchanged, "1"), Version: 11}}})
	if err == nil || IsRetryable(err) {
		t.Fatalf("moving a key ClickHouse lacks: %v, want a terminal error", err)
	}
	wantLive(t, s, tm, conv(t, tm, "30", big1, "5"))
}

// TestUnchangedReplay: after a crash ferry writes again batches ClickHouse
// already holds, and maybe later ones too. Unchanged values come from the
// state before the batch, not from the batch's own earlier write or a
// later one. (Found by the chaos suite: a replayed key change found its old
// key deleted by its own first write, a replayed update found its key
// deleted by a later change.)
func TestUnchangedReplay(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, kvTable("replay"))
	big1, big2 := randomText(30_000), randomText(30_000)
	write(t, s, tm, loader.Row{Values: conv(t, tm, "1", big1, "1"), Version: 1},
		loader.Row{Values: conv(t, tm, "2", big2, "1"), Version: 1})
	move := []loader.Row{deleted(tm, 5, int64(1)), {Values: conv(t, tm, "10", loader.Unchanged, "2"), Version: 5}}
	update := []loader.Row{{Values: conv(t, tm, "2", loader.Unchanged, "2"), Version: 6}}
	write(t, s, tm, move...)
	write(t, s, tm, update...)
	write(t, s, tm, deleted(tm, 7, int64(2)))
	wantLive(t, s, tm, conv(t, tm, "10", big1, "2"))

	// The replay, from the key change on.
	write(t, s, tm, move...)
	write(t, s, tm, update...)
	write(t, s, tm, deleted(tm, 7, int64(2)))
	wantLive(t, s, tm, conv(t, tm, "10", big1, "2"))

	// Replayed as one batch.
	write(t, s, tm, append(append(append([]loader.Row{}, move...), update...), deleted(tm, 7, int64(2)))...)
	wantLive(t, s, tm, conv(t, tm, "10", big1, "2"))
	if err := s.conn.Exec(ctxT(t), "OPTIMIZE TABLE "+s.table(tm.Name)+" FINAL"); err != nil {
		t.Fatal(err)
	}
	wantLive(t, s, tm, conv(t, tm, "10", big1, "2"))
}

// TestUnchangedReplayChain: a replayed batch where a key is updated and
// then moved, after ClickHouse merged its versions away: the update is
// superseded by the move's deletion, and the moved row must not take the
// superseded row's stand-in values. (Found by the chaos suite as empty
// TOASTed bodies after a PostgreSQL restart.)
func TestUnchangedReplayChain(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, kvTable("chain"))
	big := randomText(20_000)
	batch := []loader.Row{
		{Values: conv(t, tm, "1", big, "1"), Version: 1},
		{Values: conv(t, tm, "1", loader.Unchanged, "2"), Version: 2},
		deleted(tm, 3, int64(1)), {Values: conv(t, tm, "5", loader.Unchanged, "3"), Version: 3},
		{Values: conv(t, tm, "5", loader.Unchanged, "4"), Version: 4},
	}
	write(t, s, tm, batch[:1]...)
	write(t, s, tm, batch[1:]...)
	if err := s.conn.Exec(ctxT(t), "OPTIMIZE TABLE "+s.table(tm.Name)+" FINAL"); err != nil {
		t.Fatal(err)
	}
	for _, replay := range [][]loader.Row{batch[1:], batch[1:4], batch[1:2]} {
		write(t, s, tm, replay...)
		wantLive(t, s, tm, conv(t, tm, "5", big, "4"))
	}
	// And the replay followed by new changes of the moved key.
	write(t, s, tm, append(append([]loader.Row{}, batch[1:]...),
		loader.Row{Values: conv(t, tm, "5", loader.Unchanged, "5"), Version: 6})...)
	wantLive(t, s, tm, conv(t, tm, "5", big, "5"))
}
