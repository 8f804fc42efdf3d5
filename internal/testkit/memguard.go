package testkit

import (
	"fmt"
	"os"
	"runtime"
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
				fmt.Fprintf(os.Stderr, "\ntestkit.GuardHeap: the test binary's Go runtime holds %d MiB, over its limit of %d MiB: "+
					"ending it with every goroutine's stack (look for the tests' tRunner frames)\n\n", used>>20, limit>>20)
				os.Stderr.Write(allStacks())
				os.Exit(2)
			}
		}
	}()
}

// allStacks is every goroutine's stack. runtime.Stack stops the world for
// it, so a goroutine running on another thread (the test that grows, as
// likely as not) is shown too; a panic's traceback only says "running on
// other thread; stack unavailable" of it.
func allStacks() []byte {
	for size := 1 << 20; ; size *= 2 {
		buf := make([]byte, size)
		if n := runtime.Stack(buf, true); n < size || size >= 256<<20 {
			return buf[:n]
		}
	}
}
