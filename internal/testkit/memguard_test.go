package testkit

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestGuardHeap runs this test binary again with a 64 MiB guard, growing
// its heap until the guard must end it: it ends with the guard's message
// and the stack of the test that grew.
func TestGuardHeap(t *testing.T) {
	if os.Getenv("TESTKIT_GROW") == "1" {
		GuardHeap(64 << 20)
		var hold [][]byte
		for range 4096 { // 4 GiB at most: the guard ends it long before
			hold = append(hold, make([]byte, 1<<20))
			for i := 0; i < len(hold[len(hold)-1]); i += 4096 {
				hold[len(hold)-1][i] = 1
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("the guard let the heap grow to %d MiB", len(hold))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGuardHeap$", "-test.v")
	cmd.Env = append(os.Environ(), "TESTKIT_GROW=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the growing binary passed:\n%s", out)
	}
	for _, want := range []string{"over its limit of 64 MiB", "testkit.TestGuardHeap(", "goroutine "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the guard's end does not show %q:\n%.3000s", want, out)
		}
	}
}
