// Package netdial dials the TCP connections ferry keeps open for a long
// time, to PostgreSQL and to ClickHouse, so that a peer that vanished
// (a host powered off, a failover that moved an address, a firewall that
// drops the connection silently) is noticed in about a minute rather than
// after the kernel's retransmissions give up, some 15 minutes later:
//
//   - keepalive probes on an idle connection: after 15 s of silence, every
//     5 s, 6 times;
//   - TCP_USER_TIMEOUT (Linux): data sent and not acknowledged for the user
//     timeout fails the connection. The peer's kernel acknowledges, not the
//     server process, so a busy server never trips it.
//
// A failed connection is an ordinary connection error, which ferry
// retries from the last confirmed position.
package netdial

import (
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// UserTimeout is the default for how long sent data may stay
// unacknowledged.
const UserTimeout = time.Minute

// KeepAlive is the keepalive probing of every connection.
var KeepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 6}

// Dialer returns a dialer with these options for TCP (a Unix socket gets
// none); timeout bounds the dial, userTimeout is TCP_USER_TIMEOUT (0
// leaves the kernel's default).
func Dialer(timeout, userTimeout time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout:         timeout,
		KeepAliveConfig: KeepAlive,
		Control: func(network, address string, c syscall.RawConn) error {
			if userTimeout <= 0 || !strings.HasPrefix(network, "tcp") {
				return nil // a Unix socket has no such option
			}
			var serr error
			if err := c.Control(func(fd uintptr) { serr = setUserTimeout(fd, userTimeout) }); err != nil {
				return err
			}
			return serr
		},
	}
}

// UserTimeoutOf reads the TCP_USER_TIMEOUT of the TCP connection under c
// (TLS and wrappers with a NetConn method are looked through), for tests
// and diagnostics.
func UserTimeoutOf(c net.Conn) (time.Duration, error) {
	var d time.Duration
	err := control(c, "read TCP_USER_TIMEOUT", func(fd uintptr) error {
		var err error
		d, err = userTimeout(fd)
		return err
	})
	return d, err
}

// SetRecvLowWater sets how many bytes must have arrived on c before the
// kernel reports it readable (SO_RCVLOWAT; 1 is the default): a reader
// that waits in the poller then wakes once per that many bytes instead of
// once per segment. A read still returns whatever has arrived, and the
// reader must bound its wait with a deadline: fewer bytes than the mark
// never wake it. It looks through TLS and through wrappers that have a
// NetConn method to the socket. Only on Linux: elsewhere it returns an
// error and changes nothing.
func SetRecvLowWater(c net.Conn, bytes int) error {
	return control(c, "set SO_RCVLOWAT", func(fd uintptr) error { return setRecvLowWater(fd, bytes) })
}

// Queued returns how many bytes have arrived on c's socket and are not
// read yet (SIOCINQ), looking through wrappers as SetRecvLowWater does.
// Only on Linux.
func Queued(c net.Conn) (int, error) {
	var n int
	err := control(c, "read SIOCINQ", func(fd uintptr) error {
		var err error
		n, err = queued(fd)
		return err
	})
	return n, err
}

// control runs f on the file descriptor of c's socket.
func control(c net.Conn, what string, f func(fd uintptr) error) error {
	for {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return fmt.Errorf("%s: %T is not a socket", what, c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var ferr error
	if err := raw.Control(func(fd uintptr) { ferr = f(fd) }); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if ferr != nil {
		return fmt.Errorf("%s: %w", what, ferr)
	}
	return nil
}
