package chaostest

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// TestKillRandomly kills ferry with SIGKILL at random moments (in the
// initial copy, in the middle of batches, during replays) while the writer
// writes, restarting it each time; then nothing may be lost or doubled.
func TestKillRandomly(t *testing.T) {
	sc := newScenario(t, "kill")
	sc.w.start()
	var longest time.Duration
	for i := 0; i < sc.m.kills; i++ {
		f := sc.start()
		lsn := sc.walLSN()
		started := time.Now()
		wait := time.Duration(300+rand.IntN(3200)) * time.Millisecond
		// Recovery counts when ferry confirmed the WAL of its start before
		// the kill came.
		caught := make(chan time.Duration, 1)
		stop := make(chan struct{})
		go func() {
			ctx := context.Background()
			conn, err := sc.s.pg.connect(ctx, "postgres")
			if err != nil {
				return
			}
			defer conn.Close(ctx)
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				var ok bool
				err := conn.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn >= $2::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = $1`, sc.name, lsn).Scan(&ok)
				if err == nil && ok {
					caught <- time.Since(started)
					return
				}
			}
		}()
		time.Sleep(wait)
		close(stop)
		if !f.running() {
			t.Fatalf("ferry run #%d exited by itself: %v", i+1, f.err)
		}
		f.kill()
		select {
		case d := <-caught:
			longest = max(longest, d)
		default:
		}
	}
	f := sc.start()
	longest = max(longest, sc.recover(f))
	time.Sleep(sc.m.runBetween)
	tl := sc.settle(f)
	record(t, result{scenario: "SIGKILL of ferry at random moments", runs: sc.m.kills,
		written: sc.written(), lost: tl.lost, doubled: tl.doubled,
		peakRSS: sc.peakRSS(), recovery: longest, note: "restart until the WAL of the restart is confirmed"})
}
