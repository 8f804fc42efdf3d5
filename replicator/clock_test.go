package replicator

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// fillCounter is a connection that counts reads of its socket as
// bufferedConn does.
type fillCounter struct {
	net.Conn
	fills uint64
}

func (c *fillCounter) Fills() uint64 { return c.fills }

// TestStreamClock: a reading is used again until the socket is read,
// clockUses times, or the clock is told the time moved; without a count of
// reads every call reads the clock.
func TestStreamClock(t *testing.T) {
	conn := &fillCounter{}
	var c streamClock
	c.watch(conn)
	later := func(prev time.Time) {
		t.Helper()
		time.Sleep(time.Millisecond)
		if now := c.now(); !now.After(prev) {
			t.Fatalf("read %v, want a new reading after %v", now, prev)
		}
	}
	first := c.now()
	time.Sleep(time.Millisecond)
	for i := 1; i < clockUses; i++ {
		if now := c.now(); !now.Equal(first) {
			t.Fatalf("use %d: read %v, want the first reading %v", i+1, now, first)
		}
	}
	later(first) // clockUses uses
	r := c.now()
	conn.fills++ // a read of the socket
	later(r)
	r = c.now()
	c.moved()
	later(r)

	var plain streamClock
	plain.watch(struct{ net.Conn }{}) // counts no reads
	a := plain.now()
	time.Sleep(time.Millisecond)
	if b := plain.now(); !b.After(a) {
		t.Fatalf("without a count of reads: read %v after %v, want the clock read every time", b, a)
	}
}

// TestBufferedConnFills: only reads that find the buffer empty count.
func TestBufferedConnFills(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	bc := &bufferedConn{Conn: a, r: bufio.NewReaderSize(a, readBuffer)}
	go func() { _, _ = b.Write([]byte("0123456789")) }()
	p := make([]byte, 4)
	if _, err := bc.Read(p); err != nil {
		t.Fatal(err)
	}
	if _, err := bc.Read(p); err != nil { // from the buffer
		t.Fatal(err)
	}
	if got := bc.Fills(); got != 1 {
		t.Fatalf("fills %d after a read of the socket and one of the buffer, want 1", got)
	}
}
