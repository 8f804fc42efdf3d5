// Package testkit holds the few helpers that tests of several packages
// share: running the ferry binary as a subprocess, a TCP proxy that cuts,
// stalls and slows connections, and a sink whose write a stop cuts short.
package testkit

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Buffer collects a subprocess's output while the test reads it: a
// bytes.Buffer that is safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// From returns what was written from byte off on, and the length so far:
// a reader that polls the output copies only what is new.
func (b *Buffer) From(off int) (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.b.Len()
	if off >= n {
		return "", n
	}
	return string(b.b.Bytes()[off:]), n
}

// BuildFerry compiles the ferry command into the test's temporary
// directory and returns the binary's path. The build cache makes every
// build after the first a link.
func BuildFerry(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ferry")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/ferry-cdc/ferry/cmd/ferry").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ferry: %v\n%s", err, out)
	}
	return bin
}

// WaitFor polls cond every 100ms until it holds, failing the test after d.
func WaitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
