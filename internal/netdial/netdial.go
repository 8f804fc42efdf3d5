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
	"crypto/tls"
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
// (a TLS connection is looked through), for tests and diagnostics.
func UserTimeoutOf(c net.Conn) (time.Duration, error) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, fmt.Errorf("%T is not a socket", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var d time.Duration
	var gerr error
	if err := raw.Control(func(fd uintptr) { d, gerr = userTimeout(fd) }); err != nil {
		return 0, err
	}
	return d, gerr
}
