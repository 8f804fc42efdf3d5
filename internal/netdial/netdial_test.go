//go:build linux

package netdial

import (
	"context"
	"net"
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
