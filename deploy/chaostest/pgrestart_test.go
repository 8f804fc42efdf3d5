package chaostest

import (
	"fmt"
	"testing"
	"time"
)

// TestPostgresRestart restarts PostgreSQL mid-stream, with a fast and with
// an immediate (crash-like) shutdown: ferry reconnects and resumes from
// its confirmed position.
func TestPostgresRestart(t *testing.T) {
	for _, shutdown := range []string{"fast", "immediate"} {
		t.Run(shutdown, func(t *testing.T) {
			sc := newScenario(t, "pgrestart_"+shutdown)
			sc.w.start()
			f := sc.start()
			sc.recover(f)
			var longest time.Duration
			for i := 0; i < sc.m.restarts; i++ {
				time.Sleep(sc.m.runBetween)
				if err := sc.s.pg.restart(shutdown); err != nil {
					t.Fatal(err)
				}
				if !f.running() {
					t.Fatalf("ferry exited after PostgreSQL's restart: %v", f.err)
				}
				longest = max(longest, sc.recover(f))
			}
			time.Sleep(sc.m.runBetween)
			tl := sc.settle(f)
			record(t, result{scenario: fmt.Sprintf("PostgreSQL restarted, %s shutdown", shutdown), runs: sc.m.restarts,
				written: sc.written(), lost: tl.lost, doubled: tl.doubled, peakRSS: sc.peakRSS(), recovery: longest,
				note: fmt.Sprintf("writer lost its connection %d times", sc.w.lostConns)})
		})
	}
}
