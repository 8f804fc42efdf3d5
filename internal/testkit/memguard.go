package testkit

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The Go runtime's memory mapped and not returned to the system (heap,
// goroutine stacks, runtime structures): about what it adds to the RSS.
// Read without stopping the world.
const (
	totalMetric    = "/memory/classes/total:bytes"
	releasedMetric = "/memory/classes/heap/released:bytes"
)

// GuardHeap ends the test binary, printing every goroutine's stack (and so
// the tests that run), once the Go runtime holds more than limit bytes
// (heap and goroutine stacks: a leak of either). A
// binary that grows without bound otherwise meets the kernel's OOM killer,
// which says nothing of where the memory went, and on a shared machine may
// take the servers or another package's binary with it: a CI run lost
// loader/kafka's binary at 23 GB that way, and its slots stayed behind for
// the next leg. Call it from TestMain, before m.Run.
func GuardHeap(limit uint64) {
	sample := []metrics.Sample{{Name: totalMetric}, {Name: releasedMetric}}
	go func() {
		for range time.Tick(200 * time.Millisecond) {
			metrics.Read(sample)
			if sample[0].Value.Kind() != metrics.KindUint64 || sample[1].Value.Kind() != metrics.KindUint64 {
				return
			}
			if used := sample[0].Value.Uint64() - sample[1].Value.Uint64(); used > limit {
				debug.SetTraceback("all")
				fmt.Fprintf(os.Stderr, "\ntestkit.GuardHeap: the test binary's Go runtime holds %d MiB, over its limit of %d MiB: "+
					"ending it with every goroutine's stack (look for the tests' tRunner frames)\n", used>>20, limit>>20)
				panic(fmt.Sprintf("Go runtime memory of %d MiB over the test binary's limit of %d MiB", used>>20, limit>>20))
			}
		}
	}()
}
