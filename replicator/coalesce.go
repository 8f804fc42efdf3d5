package replicator

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Reading a backlog in fewer, larger reads. The walsender writes each
// message of the stream as it decodes it, and a reader as fast as ferry
// takes them one read(2) each: in a catch-up, reads and the scheduler's
// wake-ups were half of ferry's CPU. While the stream is behind the server
// (lagBytes or more of WAL), a read that found the socket drained is
// followed by a short wait before the next one, so that the kernel gathers
// more messages for it. A stream that keeps up reads as before: its
// latency is not touched.

const (
	// coalesceWait is the wait after a read that drained the socket.
	coalesceWait = 200 * time.Microsecond
	// lagBytes is how far behind the server's WAL end the stream must be
	// for its reads to wait.
	lagBytes = 1 << 20
)

// coalescingConn is a connection whose reads wait after a drained read
// while behind is set.
type coalescingConn struct {
	net.Conn
	behind  atomic.Bool
	drained bool // the last read returned less than it could take
}

func (c *coalescingConn) Read(p []byte) (int, error) {
	if c.drained && c.behind.Load() {
		time.Sleep(coalesceWait)
	}
	n, err := c.Conn.Read(p)
	c.drained = n < len(p)
	return n, err
}

// coalesceReads makes the connection of cfg a coalescingConn, handed to
// got once dialed.
func coalesceReads(got func(*coalescingConn)) func(*pgconn.Config) {
	return func(cfg *pgconn.Config) {
		dial := cfg.DialFunc // set by setConnOptions
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			cc := &coalescingConn{Conn: c}
			got(cc)
			return cc, nil
		}
	}
}
