package replicator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
)

// stream follows the slot and feeds the batcher. Its state is only touched
// by the goroutine running loop.
type stream struct {
	rep       *Replicator // for catalog reads and copies of tables that join or change
	conn      *pgconn.PgConn
	cfg       Config
	log       *zap.Logger
	batch     *loader.Batcher
	sink      loader.Sink
	retryable func(error) bool

	sql     *pgx.Conn            // for catalog reads while streaming; opened on first use
	byOID   map[uint32]*relation // the tables ferry replicates
	skipped map[uint32]bool      // relations of the publication ferry was not asked for

	inTx           bool
	txID           uint32        // xid of the transaction being received
	txCommitMicros int64         // and its commit time, from its Begin message
	txCommit       pglogrepl.LSN // and the position of its commit
	// The changes of a multi-insert record (COPY) share a WAL position:
	// sameAt is the position of the last row added, sameNext the number
	// the next row at that position gets (see add).
	sameAt, sameNext uint64
	lastEnd          pglogrepl.LSN // end of the last transaction fully received
	lastCommitTime   time.Time     // its commit time; zero when lastEnd came from a keepalive
	acked            pglogrepl.LSN // last position confirmed to PostgreSQL
	target           pglogrepl.LSN // catch-up: stop once everything before it is stored
	serverAt         pglogrepl.LSN // server's WAL end as last reported

	nextStatus time.Time
	rows       uint64

	// Silence: a connection whose peer vanished without a FIN or RST (a
	// black-holed network) would otherwise block a receive until TCP gives
	// up, many minutes later. heard is set by every message; lastHeard is
	// when the stream last heard the server or finished a flush.
	heard     bool
	lastHeard time.Time
	// lastFlush is when the last flush that wrote rows ended (BatchConfig.Quiet).
	lastFlush time.Time
	// behind is set while the last message received lies lagBytes or more
	// before the server's WAL end: a backlog, written in large batches
	// (no quiet flush).
	behind bool

	spills *spills // streamed transactions in progress; nil without protocol 2 streaming
	binary bool    // values come in binary form (binaryStream)

	guard *partGuard // nil when no partitioned table is replicated

	memberCheck time.Time // when checkMembership last read the catalog
	// unchangedAt is when the newest pending row with Unchanged values
	// was queued, zero when none is (see membership.go).
	unchangedAt time.Time
	leftToCopy  int  // updates left to copies of tables added back (see membership.go), in all
	checking    bool // checkMembership is running (it flushes, and a flush may call it)

	resyncs map[uint32]*liveResync // copies running beside the stream, by table OID (see resynclive.go)
	// stoppedHold, when stopped is set, is the least hold of the copies
	// stopped by stopResyncs, which still bounds what is confirmed.
	stoppedHold pglogrepl.LSN
	stopped     bool

	// The read deadline last set on the replication connection.
	rdeadline time.Time
	bulk      bulkRead    // see bulkread.go
	clock     streamClock // see clock.go
}

// errCaughtUp ends loop in catch-up mode.
var errCaughtUp = errors.New("caught up")

// loop receives until ctx is done, the catch-up target is stored, or an
// error. On a cancelled ctx it flushes and confirms what it has, and
// returns nil.
func (s *stream) loop(ctx context.Context) error {
	// Receives run without a context (see receive); a cancelled ctx ends
	// the one in progress through the connection's read deadline.
	stopWatch := context.AfterFunc(ctx, func() { _ = s.conn.Conn().SetReadDeadline(time.Now()) })
	s.clock.watch(s.conn.Conn())
	defer func() {
		s.stopResyncs()
		stopWatch()
		if s.bulk.on {
			// Whatever reads the connection next reads without a deadline.
			s.setBulk(false)
		}
		_ = s.conn.Conn().SetReadDeadline(time.Time{})
	}()
	for {
		if ctx.Err() != nil {
			return s.shutdown()
		}
		err := s.receive(ctx)
		if err == nil {
			err = s.tick(ctx)
		}
		switch {
		case errors.Is(err, errCaughtUp):
			s.log.Info("caught up", zap.Stringer("confirmed_lsn", s.acked), zap.Uint64("rows", s.rows))
			return nil
		case err != nil && ctx.Err() != nil:
			// The stop cut a receive or a write short (the client closes
			// the connection of a cancelled insert, so the error need not
			// be the context's): rows not written are still pending, and
			// shutdown writes them again.
			return s.shutdown()
		case err != nil:
			return err
		}
	}
}

// tick flushes when the batch is full or due and sends a status update
// when one is due: after every message received, and after every change
// of a streamed transaction replayed from disk.
func (s *stream) tick(ctx context.Context) error {
	now := s.clock.now()
	if s.batch.Full() || s.batch.Due(now) {
		if err := s.flush(ctx); err != nil {
			return err
		}
		s.clock.moved() // a flush can take a while
		now = s.clock.now()
	}
	// Not only when a status update is due: keepalives answered at once
	// (see keepalive) put that off for as long as the server's WAL moves.
	if !now.Before(s.memberDue()) {
		if err := s.checkMembership(ctx, false); err != nil {
			return err
		}
	}
	if err := s.pollResyncs(ctx); err != nil {
		return err
	}
	if !now.Before(s.nextStatus) {
		if err := s.checkPartitions(ctx, false); err != nil {
			return err
		}
		return s.sendStatus(false)
	}
	return nil
}

// receive waits for one message, or until a flush or status update is due.
func (s *stream) receive(ctx context.Context) error {
	now := s.clock.now()
	bulk := s.pace(now)
	deadline := s.nextStatus
	if d := s.batch.Deadline(); !d.IsZero() && d.Before(deadline) {
		deadline = d
	}
	if d := s.memberDue(); d.Before(deadline) {
		deadline = d
	}
	if len(s.resyncs) > 0 {
		if d := now.Truncate(resyncPoll).Add(resyncPoll); d.Before(deadline) {
			deadline = d // a copy's end is noticed within resyncPoll
		}
	}
	if s.quietFlushWaits() {
		// Rows of whole transactions are pending: if nothing more arrives
		// for quietWait, they are written (see idle).
		// In whole milliseconds: the deadline then moves (a call into the
		// runtime's poller) at most once a millisecond, not per message.
		d := now.Add(quietWait).Truncate(time.Millisecond)
		if next := s.lastFlush.Add(s.cfg.Batch.Quiet); next.After(d) {
			d = next
		}
		if d.Before(deadline) {
			deadline = d
		}
	}
	if bulk {
		// In whole milliseconds, as above.
		if d := now.Add(bulkWait).Truncate(time.Millisecond); d.Before(deadline) {
			deadline = d
		}
	}
	if s.cfg.Batch.Quiet > 0 && s.inTx && s.rdeadline.Before(deadline) && now.Before(s.rdeadline) {
		// The quiet flush's deadline, set between transactions, is left as
		// it is for the one that began (at most a receive that ends early):
		// moving it there and back at every transaction was 6 % of the CPU
		// of a catch-up of single-row transactions.
		deadline = s.rdeadline
	}
	if !deadline.Equal(s.rdeadline) {
		if err := s.conn.Conn().SetReadDeadline(deadline); err != nil {
			return fmt.Errorf("receive from slot %s: %w", s.cfg.Slot, err)
		}
		s.rdeadline = deadline
	}
	if ctx.Err() != nil { // cancelled before the deadline above was set
		return ctx.Err()
	}
	// context.Background, not ctx: pgconn then watches no context, which
	// cost a fifth of the CPU of a catch-up of single-row transactions.
	// The deadline ends the receive instead, as a timeout pgconn survives.
	msg, err := s.conn.ReceiveMessage(context.Background())
	if err != nil {
		if pgconn.Timeout(err) && ctx.Err() == nil {
			if bulk && s.bulkPending() {
				// Messages are arriving, fewer than bulkBytes of them
				// yet: the next receive reads them. Not idle.
				return nil
			}
			return s.idle(ctx)
		}
		return fmt.Errorf("receive from slot %s: %w", s.cfg.Slot, err)
	}
	s.heard = true
	s.bulk.msgs++
	switch msg := msg.(type) {
	case *pgproto3.CopyData:
		return s.copyData(ctx, msg.Data)
	case *pgproto3.ErrorResponse:
		return decoderError(s.cfg.Slot, s.acked, pgconn.ErrorResponseToPgError(msg))
	case *pgproto3.CopyDone, *pgproto3.CommandComplete:
		return fmt.Errorf("slot %s: %w", s.cfg.Slot, errStreamEnded)
	default:
		return fmt.Errorf("slot %s: unexpected message %T", s.cfg.Slot, msg)
	}
}

// idle runs when nothing arrived before the deadline. In catch-up mode it
// asks the server where its WAL ends, so that a quiet database still lets
// the command finish.
func (s *stream) idle(ctx context.Context) error {
	now := time.Now()
	if s.quietFlushWaits() && !now.Before(s.lastFlush.Add(s.cfg.Batch.Quiet)) {
		if err := s.flush(ctx); err != nil {
			return err
		}
		now = time.Now()
	}
	if s.heard || s.lastHeard.IsZero() {
		s.heard, s.lastHeard = false, now
	}
	silent := now.Sub(s.lastHeard)
	if silent > s.cfg.ServerSilence {
		return fmt.Errorf("slot %s: %w: nothing for %s, not even an answer to a status update that asked for one",
			s.cfg.Slot, errServerSilent, silent.Round(time.Second))
	}
	if (s.cfg.CatchUp && !s.inTx && s.batch.Len() == 0) || silent >= s.cfg.StandbyInterval {
		if err := s.checkPartitions(ctx, s.cfg.CatchUp); err != nil {
			return err
		}
		if err := s.checkMembership(ctx, false); err != nil {
			return err
		}
		// A live walsender answers at once; its answer resets the silence.
		return s.sendStatus(true)
	}
	return nil
}

// lagBytes is how far before the server's WAL end a message must lie for
// the stream to take itself as behind.
const lagBytes = 1 << 20

// quietWait is how long the stream waits for more before it takes itself
// as quiet (BatchConfig.Quiet): the messages of a transaction the server
// is sending follow one another closer than that.
const quietWait = 2 * time.Millisecond

// quietFlushWaits reports whether pending rows, of whole transactions
// only, are to be written once the stream goes quiet. Not while it is
// behind: a backlog's reads find the socket drained now and then, and
// flushing each time made a catch-up write small batches (a third more
// CPU, half as much again of time, in 100-row transactions).
func (s *stream) quietFlushWaits() bool {
	return s.cfg.Batch.Quiet > 0 && s.batch.Len() > 0 && !s.inTx && !s.behind
}

// errServerSilent: PostgreSQL sent nothing for longer than
// Config.ServerSilence. The connection is taken as lost and made again.
var errServerSilent = errors.New("no message from PostgreSQL; taking the connection as lost")

func (s *stream) copyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("slot %s: parse keepalive: %w", s.cfg.Slot, err)
		}
		return s.keepalive(ctx, ka)
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("slot %s: parse WAL data: %w", s.cfg.Slot, err)
		}
		s.serverAt = max(s.serverAt, xld.ServerWALEnd)
		s.behind = s.serverAt > xld.WALStart+lagBytes
		return s.walData(ctx, xld)
	}
	return nil
}

// keepalive answers the server and, between transactions with nothing
// pending, moves the confirmed position to the server's WAL end: every
// transaction that committed before it has already arrived and is stored,
// so an idle database's slot does not hold WAL back.
func (s *stream) keepalive(ctx context.Context, ka pglogrepl.PrimaryKeepaliveMessage) error {
	s.serverAt = max(s.serverAt, ka.ServerWALEnd)
	s.cfg.Observer.ServerWAL(ka.ServerWALEnd)
	moved := false
	if !s.inTx && s.batch.Len() == 0 && ka.ServerWALEnd > s.lastEnd {
		s.lastEnd = ka.ServerWALEnd
		s.lastCommitTime = time.Time{}
		moved = true
	}
	if s.cfg.CatchUp && !s.inTx && s.lastEnd >= s.catchUpTo() {
		if err := s.flush(ctx); err != nil {
			return err
		}
		if s.acked >= s.catchUpTo() {
			return errCaughtUp
		}
	}
	// Confirming at once when caught up lets an idle slot (and the lag
	// metrics) reach the server's WAL end without waiting for the next
	// standby interval; the walsender then stops asking.
	if ka.ReplyRequested || moved {
		if err := s.checkPartitions(ctx, s.cfg.CatchUp); err != nil {
			return err
		}
		return s.sendStatus(false)
	}
	return nil
}

// flush writes every pending row, retrying retryable errors with backoff
// while it keeps the connection to PostgreSQL alive, then confirms the end
// of the last complete transaction.
func (s *stream) flush(ctx context.Context) error {
	if err := s.checkBeforeFlush(ctx); err != nil {
		return err
	}
	if s.batch.Len() > 0 {
		n := s.batch.Len()
		start := time.Now()
		if err := s.flushWithRetry(ctx); err != nil {
			if err = s.awaitCopies(ctx, err); err != nil {
				if err = s.retryLeftToCopy(ctx, err); err != nil {
					return err
				}
			}
		}
		s.unchangedAt = time.Time{}
		s.lastFlush = time.Now()
		took := time.Since(start)
		s.lastHeard = time.Now() // a long flush is not the server's silence
		s.cfg.Observer.Flushed(n, took)
		s.log.Debug("flushed", zap.Int("rows", n), zap.Duration("took", took))
	}
	if err := s.checkPartitions(ctx, s.cfg.CatchUp); err != nil {
		return err
	}
	if s.advance() {
		return s.sendStatus(false)
	}
	return nil
}

// advance moves the confirmed position to the end of the last complete
// transaction when nothing received is still only in memory, and reports
// whether it moved.
func (s *stream) advance() bool {
	to := s.guard.confirmable(s.lastEnd)
	if hold, ok := s.resyncHold(); ok {
		to = min(to, hold)
	}
	if s.batch.Len() > 0 || to <= s.acked {
		return false
	}
	s.acked = to
	at := s.lastCommitTime
	if to < s.lastEnd {
		at = time.Time{} // not the last transaction's end
	}
	s.cfg.Observer.Confirmed(s.acked, at)
	return true
}

func (s *stream) flushWithRetry(ctx context.Context) error {
	wait := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.batch.Flush(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || s.retryable == nil || !s.retryable(err) {
			return fmt.Errorf("write to destination: %w", err)
		}
		s.cfg.Observer.Retry("clickhouse", err)
		s.log.Warn("write failed, retrying", zap.Int("attempt", attempt), zap.Duration("in", wait), zap.Error(err))
		if err := s.sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(wait*2, maxRetryWait)
	}
}

// sleep waits d, answering the server meanwhile so wal_sender_timeout does
// not end the connection while the destination is down.
func (s *stream) sleep(ctx context.Context, d time.Duration) error {
	until := time.Now().Add(d)
	for time.Now().Before(until) {
		if err := s.sendStatus(false); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Until(until), s.cfg.StandbyInterval)):
		}
	}
	return nil
}

// sendStatus confirms s.acked (advanced first, where it can be):
// PostgreSQL may recycle WAL before it and will not send again what came
// before it.
func (s *stream) sendStatus(replyRequested bool) error {
	s.advance()
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: s.acked,
		WALFlushPosition: s.acked,
		WALApplyPosition: s.acked,
		ReplyRequested:   replyRequested,
	})
	if err != nil {
		return fmt.Errorf("slot %s: send status update: %w", s.cfg.Slot, err)
	}
	s.nextStatus = time.Now().Add(s.cfg.StandbyInterval)
	return nil
}

// shutdown flushes and confirms on the way out of a cancelled run.
func (s *stream) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.stopResyncs() // the next run meets their requests again
	// A transaction cut in half is not confirmed, so its rows may be
	// written: PostgreSQL sends the whole transaction again next time.
	if err := s.flush(ctx); err != nil {
		return fmt.Errorf("flush on shutdown: %w", err)
	}
	s.log.Info("stopped", zap.Stringer("confirmed_lsn", s.acked), zap.Uint64("rows", s.rows))
	return nil
}

// decoderError is the error a walsender sent in the stream. An internal
// error of PostgreSQL's logical decoding (XX000: "could not map filenode
// ... to relation OID" was met under concurrent DDL) comes back the same
// at every start, since the slot decodes the same WAL again; the message
// says so and names the way out, which copies every table afresh.
func decoderError(slot string, confirmed pglogrepl.LSN, pe *pgconn.PgError) error {
	if pe.Code != "XX000" {
		return fmt.Errorf("slot %s: %w", slot, pe)
	}
	return fmt.Errorf("slot %s: %w (an internal error, not a lost connection) "+
		"after %s, the position ferry confirmed last; a restart decodes the same WAL again and is likely to fail the same way. "+
		"If it does: stop ferry, drop the slot (SELECT pg_drop_replication_slot('%s')) and start ferry again, which copies every table afresh: %w",
		slot, errDecoderFailed, confirmed, slot, pe)
}

// errDecoderFailed marks decoderError's internal errors.
var errDecoderFailed = errors.New("PostgreSQL's logical decoding failed inside the server")

// errCopyAgain: the initial copy is to be made again (a decoder failure
// before anything past it was confirmed); the next cycle makes it.
var errCopyAgain = errors.New("copying every table again")
