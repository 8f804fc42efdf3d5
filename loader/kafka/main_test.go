package kafka_test

import (
	"os"
	"testing"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// TestMain bounds the binary's memory: the package's tests peak near 0.5 GB
// (loader/kafka, make test, 2026-12), in-process brokers included.
func TestMain(m *testing.M) {
	testkit.GuardHeap(4 << 30)
	os.Exit(m.Run())
}
