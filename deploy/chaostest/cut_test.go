package chaostest

import (
	"fmt"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// TestProxyFaults cuts, stalls and slows ferry's connections to
// PostgreSQL and to ClickHouse through the proxies. After each fault the
// writer pauses, ferry (still running: a second ferry on its slot would
// wait for it) must reach lag 0, and ferry verify must pass.
func TestProxyFaults(t *testing.T) {
	sides := []struct {
		name string
		p    func(*suite) *testkit.Proxy
	}{
		{"PostgreSQL", func(s *suite) *testkit.Proxy { return s.pgProxy }},
		{"ClickHouse", func(s *suite) *testkit.Proxy { return s.chProxy }},
	}
	for _, side := range sides {
		t.Run(side.name, func(t *testing.T) {
			sc := newScenario(t, "proxy_"+map[string]string{"PostgreSQL": "pg", "ClickHouse": "ch"}[side.name])
			p := side.p(sc.s)
			f := sc.start()
			sc.recover(f)
			for _, fault := range proxyFaults(sc.m) {
				rowsBefore := sc.w.rows.Load()
				sc.w.start()
				time.Sleep(sc.m.runBetween)
				before := f.peakRSS()
				fault.inject(p, sc.m)
				if !f.running() {
					t.Fatalf("ferry exited during %s: %v", fault.name, f.err)
				}
				recovery := sc.recover(f)
				time.Sleep(sc.m.runBetween)
				if err := sc.w.stop(); err != nil {
					t.Fatal(err)
				}
				sc.waitConfirmed(sc.walLSN(), f, 5*time.Minute)
				tl := sc.compare()
				record(t, result{scenario: fmt.Sprintf("proxy to %s: %s", side.name, fault.name), runs: fault.runs,
					written: sc.w.rows.Load() - rowsBefore, lost: tl.lost, doubled: tl.doubled, peakRSS: max(before, f.peakRSS()),
					recovery: recovery, note: "rows written: during this fault's part"})
			}
			if err := f.stop(90 * time.Second); err != nil {
				t.Errorf("ferry after SIGTERM: %v (want exit 0)", err)
			}
		})
	}
}

type proxyFault struct {
	name   string
	runs   int
	inject func(p *testkit.Proxy, m mode)
}

func proxyFaults(m mode) []proxyFault {
	return []proxyFault{
		{"every connection cut, 3 times", 3, func(p *testkit.Proxy, m mode) {
			for i := 0; i < 3; i++ {
				p.Drop()
				time.Sleep(m.runBetween / 2)
			}
		}},
		{fmt.Sprintf("stalled %s", m.stall), 1, func(p *testkit.Proxy, m mode) {
			p.Stall()
			time.Sleep(m.stall)
			p.Unstall()
		}},
		{fmt.Sprintf("slowed to 32 KiB/s for %s", m.stall*2), 1, func(p *testkit.Proxy, m mode) {
			p.Throttle(32 << 10)
			time.Sleep(m.stall * 2)
			p.Throttle(0)
		}},
	}
}
