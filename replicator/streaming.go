package replicator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
)

// Values of Config.Streaming.
const (
	StreamingOff  = "off"
	StreamingOn   = "on"
	StreamingAuto = "auto"
)

// Streaming of transactions in progress (pgoutput protocol version 2).
//
// Once a transaction's decoded changes outgrow logical_decoding_work_mem,
// PostgreSQL 14+ sends them in chunks while the transaction still runs
// (Stream Start, changes, Stream Stop), interleaved with other
// transactions, and later a Stream Commit or Stream Abort. ferry appends a
// streamed transaction's changes to a spill file of its own and writes
// nothing of it to the sink until its Stream Commit arrives; it then
// replays the file through the same handlers as any other transaction, each
// change versioned by its own WAL position (the same position PostgreSQL
// gives that change when it sends the transaction unstreamed, so a replay
// after a crash, streamed or not, collapses into the same rows), and
// confirms the commit's end position once every row is stored. A Stream
// Abort of the transaction drops its file; one of a subtransaction (ROLLBACK
// TO SAVEPOINT) marks that subtransaction's xid, which every spilled change
// records, so the replay skips its changes.
//
// Memory stays bounded by the batcher's limits and the largest single
// message: chunks go to disk as they come, and the replay reads one change
// at a time.
//
// Confirming positions while a streamed transaction is open is safe.
// ferry still confirms only the ends of transactions whose rows are all
// stored, and the server's WAL end from a keepalive when nothing is
// pending. Such a position may lie past changes of an open streamed
// transaction, but a slot's confirmed_flush_lsn only says which commits the
// consumer has: PostgreSQL keeps the slot's restart_lsn at or before the
// first change of every transaction still in progress, and after a
// reconnect it decodes from there and sends again, from its first change,
// every transaction that commits after the confirmed position. So a crash
// with a half-spilled transaction, or in the middle of replaying one, loses
// nothing: the spill file dies with the process and the whole transaction
// comes again. PostgreSQL's own subscriber (streaming = on) relies on the
// same.

// checkStreaming validates Config.Streaming.
func checkStreaming(mode string) error {
	switch mode {
	case StreamingOff, StreamingOn, StreamingAuto:
		return nil
	}
	return fmt.Errorf("streaming %q: want on, off or auto", mode)
}

// pluginArgs are pgoutput's options for START_REPLICATION, whether
// transactions in progress will be streamed, and whether values come in
// binary form (see binaryStream).
func (r *Replicator) pluginArgs(conn *pgconn.PgConn, rels []*relation) (args []string, streaming, binary bool, err error) {
	major := serverMajor(conn)
	switch r.cfg.Streaming {
	case StreamingOn:
		if major < 14 {
			return nil, false, false, fmt.Errorf("streaming=on needs PostgreSQL 14 or later, the server is %s: set --streaming to auto or off",
				conn.ParameterStatus("server_version"))
		}
		streaming = true
	case StreamingAuto:
		streaming = major >= 14
	}
	proto := "1"
	if streaming {
		proto = "2"
	}
	args = []string{"proto_version '" + proto + "'", "publication_names " + quoteLiteral(pubsList(r.cfg.Publication, rels))}
	if streaming {
		args = append(args, "streaming 'on'")
	}
	if major >= 14 {
		// Logical decoding messages: ferry's heartbeats and DDL events.
		args = append(args, "messages 'true'")
	}
	if binary = r.binaryStream(major, rels); binary {
		args = append(args, "binary 'true'")
	}
	return args, streaming, binary, nil
}

// errStreamText: a stream in binary format reached a table with a column
// that ferry reads as text only (an array, inet, interval, an extension
// type, a --text-columns column), which joined the publication or changed
// after the stream started. The stream starts again in text format from
// the slot's confirmed position, as after a lost connection.
var errStreamText = errors.New("the stream is in binary format and ferry reads a column of the table as text only; starting the stream again in text format")

// binaryStream decides whether to ask pgoutput for values in binary form
// (binary 'true', PostgreSQL 14 and later), where it sends each column of a
// type with a send function as that function's output, as COPY's binary
// format does: it spares the walsender the types' text output functions
// (timestamp_out, numeric_out, ...) and ferry their parsing, for the same
// values (the readers of the binary copy, schema.ColumnMap.Binary). The
// option holds for every table of the stream, so it is asked only when ferry
// reads every column of every table it replicates in binary form, unless
// Config.StreamText says text or the stream already fell back to text
// (errStreamText) in this run.
func (r *Replicator) binaryStream(major int, rels []*relation) bool {
	if r.cfg.StreamText || r.textStream || major < 14 {
		return false
	}
	for _, rel := range rels {
		if !rel.readsBinary() {
			return false
		}
	}
	return true
}

// streamed handles the messages of protocol version 2's streaming: the
// four stream control messages, and every change between a Stream Start
// and its Stream Stop. handled is false for any other message.
func (s *stream) streamed(ctx context.Context, xld pglogrepl.XLogData) (handled bool, err error) {
	data := xld.WALData
	switch pglogrepl.MessageType(data[0]) {
	case pglogrepl.MessageTypeStreamStart, pglogrepl.MessageTypeStreamStop,
		pglogrepl.MessageTypeStreamCommit, pglogrepl.MessageTypeStreamAbort:
		msg, err := parseStreamControl(data)
		if err != nil {
			return true, fmt.Errorf("slot %s: parse pgoutput message at %s: %w", s.cfg.Slot, xld.WALStart, err)
		}
		return true, s.streamControl(ctx, msg)
	}
	sp := s.spills.cur
	if sp == nil {
		return false, nil
	}
	switch pglogrepl.MessageType(data[0]) {
	case pglogrepl.MessageTypeRelation, pglogrepl.MessageTypeType, pglogrepl.MessageTypeInsert, pglogrepl.MessageTypeUpdate,
		pglogrepl.MessageTypeDelete, pglogrepl.MessageTypeTruncate, pglogrepl.MessageTypeMessage:
	default:
		return true, fmt.Errorf("slot %s: unexpected pgoutput message %q at %s inside streamed transaction %d", s.cfg.Slot, data[0], xld.WALStart, sp.xid)
	}
	if len(data) < 5 {
		return true, fmt.Errorf("slot %s: pgoutput message %q at %s cut short", s.cfg.Slot, data[0], xld.WALStart)
	}
	return true, sp.add(uint64(xld.WALStart), binaryUint32(data[1:]), data[0], data[5:])
}

func (s *stream) streamControl(ctx context.Context, msg pglogrepl.Message) error {
	switch m := msg.(type) {
	case *pglogrepl.StreamStartMessageV2:
		if s.spills.cur != nil {
			return fmt.Errorf("slot %s: stream of transaction %d started inside that of %d", s.cfg.Slot, m.Xid, s.spills.cur.xid)
		}
		sp, err := s.spills.start(m.Xid)
		if err != nil {
			return err
		}
		s.spills.cur = sp
	case *pglogrepl.StreamStopMessageV2:
		s.spills.cur = nil
	case *pglogrepl.StreamAbortMessageV2:
		if m.SubXid == m.Xid || m.SubXid == 0 {
			if sp := s.spills.take(m.Xid); sp != nil {
				s.log.Debug("streamed transaction aborted", zap.Uint32("xid", m.Xid), zap.Int("changes", sp.changes))
				sp.close()
			}
		} else if sp := s.spills.open[m.Xid]; sp != nil {
			sp.abort(m.SubXid)
		}
	case *pglogrepl.StreamCommitMessageV2:
		return s.streamCommit(ctx, m)
	}
	return nil
}

// streamCommit replays a committed streamed transaction and then commits
// it as if it had come whole.
func (s *stream) streamCommit(ctx context.Context, m *pglogrepl.StreamCommitMessageV2) error {
	sp := s.spills.take(m.Xid)
	if sp == nil {
		// PostgreSQL streams a transaction from its first change on every
		// connection, so its changes were all seen, or it had none.
		return fmt.Errorf("slot %s: commit of streamed transaction %d, none of whose changes came on this connection", s.cfg.Slot, m.Xid)
	}
	defer sp.close()
	s.inTx = true
	s.txID, s.txCommitMicros, s.txCommit = m.Xid, m.CommitTime.UnixMicro(), m.CommitLSN
	start := time.Now()
	if sp.bytes >= 64<<20 {
		// Operators see why the lag grows while it replays.
		s.log.Info("a large streamed transaction committed: writing it", zap.Uint32("xid", m.Xid),
			zap.Int("changes", sp.changes), zap.Int64("spilled_bytes", sp.bytes))
	}
	err := sp.replay(func(lsn uint64, msg []byte) error {
		if err := s.apply(ctx, msg, pglogrepl.LSN(lsn)); err != nil {
			return err
		}
		return s.tick(ctx)
	})
	if err != nil {
		return err
	}
	s.log.Debug("replayed a streamed transaction", zap.Uint32("xid", m.Xid), zap.Int("changes", sp.changes),
		zap.Int64("spilled_bytes", sp.bytes), zap.Int("aborted_subtransactions", len(sp.aborted)), zap.Duration("took", time.Since(start)))
	return s.commit(ctx, &pglogrepl.CommitMessage{CommitLSN: m.CommitLSN, TransactionEndLSN: m.TransactionEndLSN, CommitTime: m.CommitTime})
}

// parseStreamControl parses a Stream Start, Stop, Commit or Abort message,
// turning a panic of the parser on malformed input into an error.
func parseStreamControl(data []byte) (msg pglogrepl.Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			msg, err = nil, fmt.Errorf("malformed pgoutput message %q…: %v", truncate(data, 32), p)
		}
	}()
	return pglogrepl.ParseV2(data, false)
}
