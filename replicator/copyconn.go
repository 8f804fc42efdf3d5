package replicator

import (
	"bufio"
	"context"
	"net"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// readBuffer is how much a copy or replication connection reads from its
// socket at once. pgconn asks for 8 KB a read; a COPY of a big table
// arrives faster than that, and one system call per 8 KB was a tenth of
// ferry's CPU. The stream takes what a read in bulk gathered (see
// bulkread.go) in one read too.
const readBuffer = 256 << 10

// connectBuffered is connect with reads through a readBuffer buffer.
func connectBuffered(ctx context.Context, connString string) (*pgx.Conn, error) {
	return connect(ctx, connString, bufferReads)
}

// bufferReads makes the connections of cfg read through a buffer of
// readBuffer bytes. A read returns what the socket holds, as before,
// so nothing waits for the buffer to fill; and a read deadline still ends
// a read that waits, with nothing lost.
func bufferReads(cfg *pgconn.Config) {
	dial := cfg.DialFunc // set by setConnOptions
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, readBuffer)}, nil
	}
}

// bufferedConn reads a connection through a buffer, and counts the reads
// that go to the socket (see streamClock).
type bufferedConn struct {
	net.Conn
	r     *bufio.Reader
	fills atomic.Uint64 // pgconn may read from a goroutine of its own while it writes
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.r.Buffered() == 0 {
		c.fills.Add(1) // this read goes to the socket, and may wait
	}
	return c.r.Read(p)
}

// Fills is how many reads went to the socket so far.
func (c *bufferedConn) Fills() uint64 { return c.fills.Load() }

// NetConn returns the connection it reads, for its socket options.
func (c *bufferedConn) NetConn() net.Conn { return c.Conn }
