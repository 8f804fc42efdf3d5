package replicator

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// TestBulkPace: the replication connection's low-water mark is raised for
// the window after one in which bulkMsgs messages arrived, stays for the
// window, is lowered after a window with fewer, and the stream reads the
// socket's queue. Checked on the socket of a real replication connection.
func TestBulkPace(t *testing.T) {
	url := os.Getenv("FERRY_PG_URL")
	if url == "" {
		t.Skip("FERRY_PG_URL is not set: run `make stack-up` and `. .stack/env` (make test does both)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := connectReplication(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	bc, ok := conn.Conn().(*bufferedConn)
	if !ok {
		t.Fatalf("the replication connection is a %T, want reads through a buffer", conn.Conn())
	}
	mark := func() int {
		t.Helper()
		raw, err := bc.Conn.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var v int
		var gerr error
		if err := raw.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT) }); err != nil || gerr != nil {
			t.Fatal(err, gerr)
		}
		return v
	}
	s := &stream{conn: conn, log: zap.NewNop()}
	t0 := time.Now()
	steps := []struct {
		after time.Duration
		msgs  int // received before this call, in the current window
		on    bool
	}{
		{0, 0, false},
		{bulkWindow - time.Millisecond, bulkMsgs, false}, // the first window is not over
		{bulkWindow, 0, true},                            // it had bulkMsgs
		{bulkWindow + bulkWindow/2, 0, true},             // a window keeps its state
		{2*bulkWindow + time.Millisecond, bulkMsgs - 1, false},
		{3 * bulkWindow, 0, false}, // not yet a window since the last
		{3*bulkWindow + 2*time.Millisecond, 5 * bulkMsgs, true},
	}
	for i, st := range steps {
		s.bulk.msgs += st.msgs
		on := s.pace(t0.Add(st.after))
		want := 1
		if st.on {
			want = bulkBytes
		}
		if on != st.on || s.bulk.on != st.on || mark() != want {
			t.Fatalf("step %d (%s after the start): in bulk %v, mark %d; want %v, %d", i, st.after, on, mark(), st.on, want)
		}
	}
	if s.bulkPending() {
		t.Error("bytes queued on an idle replication connection")
	}
	s.setBulk(false)
	if mark() != 1 {
		t.Errorf("mark %d after setBulk(false), want 1", mark())
	}
}
