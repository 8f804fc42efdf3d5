package chaostest

import (
	"syscall"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// TestStopDuringWrite sends SIGTERM while ferry is in the middle of an
// insert into ClickHouse: the proxy in front of ClickHouse slows what
// ferry sends to 4 KiB/s, so that one insert takes seconds. A cancelled
// insert closes its connection; ferry must write the batch again on a
// fresh one, confirm, and exit 0, and nothing may be lost or doubled.
// Where the cancel lands within the insert is chance: the narrow case
// where it fails with the closed connection's error rather than the
// context's is tested directly by TestStopCutsWriteShort (replicator) and
// TestLoaderStopCutsWriteShort (loader/kafka).
func TestStopDuringWrite(t *testing.T) {
	sc := newScenario(t, "stop_write")
	p := sc.s.chProxy
	// The initial copy first: the stops are to land on the stream's writes.
	if out, err := runFerry(sc.s.bin, 5*time.Minute, sc.args("run", "--catch-up")...); err != nil {
		t.Fatalf("ferry run --catch-up: %v\n%s", err, tail(out, 4000))
	}
	const stops = 3
	var longest time.Duration
	for i := 0; i < stops; i++ {
		f := sc.start()
		t.Logf("stop #%d: caught up in %s", i+1, sc.recover(f).Round(time.Millisecond))
		sc.w.start()
		p.ThrottleUp(4 << 10)
		began := time.Now()
		if !waitInsert(p, 30*time.Second) {
			t.Fatalf("stop #%d: no insert into ClickHouse started within 30s", i+1)
		}
		t.Logf("stop #%d: an insert is on its way after %s", i+1, time.Since(began).Round(time.Millisecond))
		if err := sc.w.stop(); err != nil {
			t.Fatal(err)
		}
		_ = f.cmd.Process.Signal(syscall.SIGTERM)
		time.Sleep(300 * time.Millisecond) // the cancel lands on the slowed insert
		p.ThrottleUp(0)
		stopped := time.Now()
		if err := f.wait(90 * time.Second); err != nil {
			t.Fatalf("stop #%d: ferry after SIGTERM in the middle of an insert: %v (want exit 0)", i+1, err)
		}
		longest = max(longest, time.Since(stopped))
		t.Logf("stop #%d: ferry exited %s after the link was restored", i+1, time.Since(stopped).Round(time.Millisecond))
	}
	tl := sc.check()
	record(t, result{scenario: "SIGTERM in the middle of an insert", runs: stops,
		written: sc.written(), lost: tl.lost, doubled: tl.doubled, peakRSS: sc.peakRSS(),
		recovery: longest, note: "recovery: from the link restored, 300 ms after the SIGTERM, until ferry exited"})
}

// waitInsert waits until ferry sends ClickHouse more than 3 KiB in a
// second, most of what the slowed link carries (a progress record is a
// few hundred bytes): an insert is on its way.
func waitInsert(p *testkit.Proxy, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		before := p.Forwarded()
		time.Sleep(time.Second)
		if p.Forwarded()-before > 3<<10 {
			return true
		}
	}
	return false
}
