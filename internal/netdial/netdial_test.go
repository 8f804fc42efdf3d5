//go:build linux

package netdial

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sockopt reads one integer socket option of a TCP connection.
func sockopt(t *testing.T, c net.Conn, level, opt int) int {
	t.Helper()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := raw.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), level, opt) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

func TestDialerSetsOptions(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	for _, tc := range []struct {
		userTimeout time.Duration
		want        int
	}{{UserTimeout, 60000}, {2500 * time.Millisecond, 2500}} {
		c, err := Dialer(5*time.Second, tc.userTimeout).DialContext(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if got, err := UserTimeoutOf(c); err != nil || got.Milliseconds() != int64(tc.want) {
			t.Errorf("TCP_USER_TIMEOUT = %s (%v), want %d ms", got, err, tc.want)
		}
		if got := sockopt(t, c, unix.SOL_SOCKET, unix.SO_KEEPALIVE); got != 1 {
			t.Errorf("SO_KEEPALIVE = %d, want 1", got)
		}
		for _, o := range []struct {
			name string
			opt  int
			want int
		}{{"TCP_KEEPIDLE", unix.TCP_KEEPIDLE, 15}, {"TCP_KEEPINTVL", unix.TCP_KEEPINTVL, 5}, {"TCP_KEEPCNT", unix.TCP_KEEPCNT, 6}} {
			if got := sockopt(t, c, unix.IPPROTO_TCP, o.opt); got != o.want {
				t.Errorf("%s = %d, want %d", o.name, got, o.want)
			}
		}
		c.Close()
	}
	// 0 leaves the kernel's default (0: no user timeout).
	c, err := Dialer(5*time.Second, 0).DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := UserTimeoutOf(c); err != nil || got != 0 {
		t.Errorf("TCP_USER_TIMEOUT = %s (%v) with 0 given, want the default 0", got, err)
	}
}

// TestRecvLowWater: with the mark raised, a read that waits is not woken
// by fewer bytes than the mark (it ends at its deadline, and Queued counts
// the bytes waiting), is woken once the mark is reached, and takes all
// that arrived; a read finds bytes already there at once, below the mark.
func TestRecvLowWater(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer peer.Close()
	const mark = 1000
	if err := SetRecvLowWater(wrapped{c}, mark); err != nil {
		t.Fatal(err)
	}
	if got := sockopt(t, c, unix.SOL_SOCKET, unix.SO_RCVLOWAT); got != mark {
		t.Fatalf("SO_RCVLOWAT %d, want %d", got, mark)
	}
	buf := make([]byte, 4096)
	if _, err := peer.Write(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	// The 10 bytes were written before this read began: it returns them.
	time.Sleep(50 * time.Millisecond)
	if n, err := c.Read(buf); err != nil || n != 10 {
		t.Fatalf("read %d bytes (%v), want the 10 waiting", n, err)
	}
	// Now the socket is empty: the read waits, and 10 more bytes arriving
	// while it waits do not wake it.
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = peer.Write(make([]byte, 10))
	}()
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes (%v), want to wait for the mark until the deadline", n, err)
	}
	if n, err := Queued(wrapped{c}); err != nil || n != 10 {
		t.Fatalf("Queued: %d (%v), want 10", n, err)
	}
	// Reaching the mark wakes a waiting read, which takes everything.
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = peer.Write(make([]byte, mark))
	}()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	total := 0
	for total < mark+10 {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("read after %d bytes: %v", total, err)
		}
		total += n
	}
	if n, err := Queued(c); err != nil || n != 0 {
		t.Fatalf("Queued after reading all: %d (%v), want 0", n, err)
	}
	// Back to 1: a single byte wakes a read.
	if err := SetRecvLowWater(c, 1); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = peer.Write([]byte{1})
	}()
	if n, err := c.Read(buf); err != nil || n != 1 {
		t.Fatalf("read %d bytes (%v), want the one byte", n, err)
	}
	if err := SetRecvLowWater(struct{ net.Conn }{c}, 1); err == nil {
		t.Error("SetRecvLowWater found a socket in a wrapper without NetConn")
	}
}

// wrapped hides a connection behind NetConn, as replicator's buffered
// connection does.
type wrapped struct{ net.Conn }

func (w wrapped) NetConn() net.Conn { return w.Conn }
