package testkit

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/loader/clickhouse"
)

// StopMidWrite is a ClickHouse sink whose next write, once armed, is cut
// short by a stop: it cancels the run's context and fails as the
// ClickHouse client fails when a cancel lands while it sends the end of an
// insert. The client closes the connection to interrupt the insert, so the
// error is the closed connection's, not the context's. The window is too
// narrow to hit on purpose against a real server; every other write goes
// to the real sink.
type StopMidWrite struct {
	*clickhouse.Sink
	Cancel context.CancelFunc
	Fired  chan struct{} // closed by the write that was cut short

	armed atomic.Bool
}

// NewStopMidWrite wraps sink; cancel is the run's.
func NewStopMidWrite(sink *clickhouse.Sink, cancel context.CancelFunc) *StopMidWrite {
	return &StopMidWrite{Sink: sink, Cancel: cancel, Fired: make(chan struct{})}
}

// Arm makes the next write the one cut short.
func (s *StopMidWrite) Arm() { s.armed.Store(true) }

func (s *StopMidWrite) Write(ctx context.Context, b *loader.Batch) error {
	if !s.armed.CompareAndSwap(true, false) {
		return s.Sink.Write(ctx, b)
	}
	s.Cancel()
	close(s.Fired)
	return fmt.Errorf("clickhouse: insert %d rows into %s: send data: write tcp 127.0.0.1:1->127.0.0.1:2: %w",
		len(b.Rows), b.Table.Name, net.ErrClosed)
}
