package clickhouse

import (
	"os"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/loader"
)

// TestStateSurvivesClockStepBack writes the snapshot and table states, then
// restarts with the clock stepped back a year and writes newer ones: the
// newer states must win, as ReplacingMergeTree keeps the highest updated.
func TestStateSurvivesClockStepBack(t *testing.T) {
	first := testSink(t)
	ctx := ctxT(t)
	clock := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	first.now = func() time.Time { return clock }
	if err := first.SetSnapshotState(ctx, "s", loader.SnapshotState{LSN: "0/1"}); err != nil {
		t.Fatal(err)
	}
	if err := first.SetTableState(ctx, "s", 7, []byte("old")); err != nil {
		t.Fatal(err)
	}

	// A restart: a new sink on the same database, its clock a year behind.
	again, err := New(ctx, Config{DSN: os.Getenv("FERRY_CH_URL"), Database: first.db,
		Clock: func() time.Time { return clock.AddDate(-1, 0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := again.SetSnapshotState(ctx, "s", loader.SnapshotState{LSN: "0/2", Done: true}); err != nil {
		t.Fatal(err)
	}
	if err := again.SetTableState(ctx, "s", 7, []byte("new")); err != nil {
		t.Fatal(err)
	}

	st, err := again.SnapshotState(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if st.LSN != "0/2" || !st.Done {
		t.Errorf("snapshot state after the clock stepped back: %+v, want the newer {LSN:0/2 Done:true}", st)
	}
	states, err := again.TableStates(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(states[7]); got != "new" {
		t.Errorf("table state after the clock stepped back: %q, want the newer \"new\"", got)
	}
}
