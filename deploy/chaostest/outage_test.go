package chaostest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestClickHouseOutage kills the ClickHouse server mid-stream and starts it
// again after the outage: ferry must keep running, retry with backoff,
// hold its memory (it stops reading WAL while it cannot write, rather than
// buffering), and drain the lag once ClickHouse is back.
func TestClickHouseOutage(t *testing.T) {
	sc := newScenario(t, "outage")
	sc.w.start()
	f := sc.start()
	sc.recover(f)
	time.Sleep(sc.m.runBetween)
	before := f.peakRSS()
	walAt := sc.walLSN()
	f.resetWindow()
	sc.s.ch.kill()
	down := time.Now()
	for time.Since(down) < sc.m.outage {
		if !f.running() {
			t.Fatalf("ferry exited while ClickHouse was down: %v", f.err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	during := f.windowRSS()
	sent, written := sc.walDuringOutage(walAt)
	if err := sc.s.ch.start(); err != nil {
		t.Fatal(err)
	}
	recovery := sc.recover(f)
	retries := strings.Count(sc.log.String(), "retrying") + strings.Count(sc.log.String(), "connection lost")
	if retries == 0 {
		t.Errorf("ferry logged no retry while ClickHouse was down")
	}
	time.Sleep(sc.m.runBetween)
	tl := sc.settle(f)
	record(t, result{scenario: fmt.Sprintf("ClickHouse killed for %s", sc.m.outage), runs: 1, written: sc.written(),
		lost: tl.lost, doubled: tl.doubled, peakRSS: sc.peakRSS(), recovery: recovery,
		note: fmt.Sprintf("RSS before %s, peak during the outage %s; WAL written during it %s, sent to ferry %s; %d retries logged",
			mib(before), mib(during), kib(written), kib(sent), retries)})
}

// walDuringOutage is how much WAL PostgreSQL sent to ferry's walsender
// since from, and how much was written: ferry not reading shows as the
// first staying behind the second.
func (sc *scenario) walDuringOutage(from string) (sent, written int64) {
	sc.t.Helper()
	var s *int64
	_ = sc.pgQuery(`SELECT max(pg_wal_lsn_diff(sent_lsn, $2::pg_lsn))::bigint FROM pg_stat_replication WHERE application_name = $1 OR pid IN
		(SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1)`, &s, sc.name, from)
	if s != nil {
		sent = max(*s, 0)
	}
	_ = sc.pgQuery(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, &written, from)
	return sent, written
}

func kib(b int64) string { return fmt.Sprintf("%d KiB", b>>10) }
