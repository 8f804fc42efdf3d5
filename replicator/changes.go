package replicator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
)

// walData handles one pgoutput message.
func (s *stream) walData(ctx context.Context, xld pglogrepl.XLogData) error {
	if len(xld.WALData) == 0 {
		return fmt.Errorf("slot %s: empty pgoutput message at %s", s.cfg.Slot, xld.WALStart)
	}
	if s.spills != nil {
		if handled, err := s.streamed(ctx, xld); handled || err != nil {
			return err
		}
	}
	return s.apply(ctx, xld.WALData, xld.WALStart)
}

// apply handles one pgoutput message in protocol version 1 form, which
// came at position at: as it arrived, or replayed from a streamed
// transaction's spill.
func (s *stream) apply(ctx context.Context, data []byte, at pglogrepl.LSN) error {
	msg, err := parseMessage(data)
	if err != nil {
		return fmt.Errorf("slot %s: parse pgoutput message at %s: %w", s.cfg.Slot, at, err)
	}
	version := uint64(at)
	switch m := msg.(type) {
	case *pglogrepl.BeginMessage:
		s.inTx = true
		s.txID, s.txCommitMicros, s.txCommit = m.Xid, m.CommitTime.UnixMicro(), m.FinalLSN
	case *pglogrepl.CommitMessage:
		return s.commit(ctx, m)
	case *pglogrepl.RelationMessage:
		return s.relationMessage(ctx, m, version)
	case *pglogrepl.InsertMessage:
		return s.insert(m, version)
	case *pglogrepl.UpdateMessage:
		return s.update(m, version)
	case *pglogrepl.DeleteMessage:
		return s.delete(m, version)
	case *pglogrepl.TruncateMessage:
		return s.truncate(ctx, m)
	case *pglogrepl.LogicalDecodingMessage:
		return s.message(ctx, m, version)
	}
	return nil
}

func (s *stream) commit(ctx context.Context, m *pglogrepl.CommitMessage) error {
	s.inTx = false
	s.lastEnd = m.TransactionEndLSN
	s.lastCommitTime = m.CommitTime
	if s.cfg.CatchUp && s.lastEnd >= s.catchUpTo() {
		if err := s.flush(ctx); err != nil {
			return err
		}
		if s.acked >= s.catchUpTo() {
			return errCaughtUp
		}
	}
	return nil
}

func (s *stream) insert(m *pglogrepl.InsertMessage, version uint64) error {
	rel, ok := s.relation(m.RelationID)
	if !ok {
		return nil
	}
	s.observe(rel, "insert")
	vals, size, err := rel.values(m.Tuple, nil)
	if err != nil {
		return err
	}
	return s.add(rel, loader.Row{Values: vals, Version: version, Inserted: true}, size)
}

func (s *stream) update(m *pglogrepl.UpdateMessage, version uint64) error {
	rel, ok := s.relation(m.RelationID)
	if !ok {
		return nil
	}
	s.observe(rel, "update")
	var old *pglogrepl.TupleData
	if m.OldTupleType == pglogrepl.UpdateMessageTupleTypeOld {
		old = m.OldTuple
	}
	if rel.tm.Source.FullRow {
		return s.updateFullRow(rel, old, m.NewTuple, version)
	}
	oldVals, err := rel.oldValues(old) // the whole old row, sent for REPLICA IDENTITY FULL
	if err != nil {
		return err
	}
	if m.OldTuple != nil && !rel.tm.Source.AppendOnly && rel.keyChanged(m.OldTuple, m.NewTuple) {
		gone, err := rel.keyValues(m.OldTuple)
		if err != nil {
			return err
		}
		if err := s.add(rel, loader.Row{Values: gone, Version: version, Deleted: true, Old: oldVals}, 0); err != nil {
			return err
		}
	}
	vals, size, err := rel.values(m.NewTuple, old)
	if err != nil {
		return err
	}
	if loader.HasUnchanged(vals) {
		if rel.recopy != "" {
			rel.leftToCopy++ // see membership.go
			return nil
		}
		s.unchangedAt = time.Now()
	}
	return s.add(rel, loader.Row{Values: vals, Version: version, Old: oldVals}, size)
}

// oldValues converts a whole old row ('O' tuple) for the sinks that
// describe changes (Kafka's before), or returns nil. It does not stop the
// stream: pgoutput marks the old row of a partitioned table whose root has
// REPLICA IDENTITY FULL as whole, but a leaf that kept its default
// identity logged only the key, so the other columns come as NULL, NOT
// NULL ones too. Such a row, which says nothing true of the columns beyond
// the key, is left out.
//
// The one error it returns is a binary value ferry cannot read, which
// starts the stream again in text (errStreamText).
func (r *relation) oldValues(old *pglogrepl.TupleData) ([]any, error) {
	if old == nil {
		return nil, nil
	}
	vals, _, err := r.values(old, nil)
	if errors.Is(err, errStreamText) {
		return nil, err
	}
	if err != nil {
		return nil, nil
	}
	return vals, nil
}

// updateFullRow handles a table identified by its whole row: unless the
// update changed nothing, it deletes the old row's key and writes the new.
func (s *stream) updateFullRow(rel *relation, old, new *pglogrepl.TupleData, version uint64) error {
	if old == nil {
		return fmt.Errorf("table %s: an update came without the old row that REPLICA IDENTITY FULL sends", rel.ref)
	}
	oldVals, _, err := rel.values(old, nil)
	if err != nil {
		return err
	}
	newVals, size, err := rel.values(new, old)
	if err != nil {
		return err
	}
	gone := loader.Row{Values: oldVals, Version: version, Deleted: true}
	row := loader.Row{Values: newVals, Version: version, Old: oldVals}
	if err := rel.setRowKey(&gone); err != nil {
		return err
	}
	if err := rel.setRowKey(&row); err != nil {
		return err
	}
	if gone.RowKey != row.RowKey {
		if err := s.add(rel, gone, 0); err != nil {
			return err
		}
	}
	return s.add(rel, row, size)
}

func (s *stream) delete(m *pglogrepl.DeleteMessage, version uint64) error {
	rel, ok := s.relation(m.RelationID)
	if !ok || rel.tm.Source.AppendOnly {
		return nil
	}
	s.observe(rel, "delete")
	if rel.tm.Source.FullRow {
		vals, _, err := rel.values(m.OldTuple, nil)
		if err != nil {
			return err
		}
		return s.add(rel, loader.Row{Values: vals, Version: version, Deleted: true}, 0)
	}
	vals, err := rel.keyValues(m.OldTuple)
	if err != nil {
		return err
	}
	row := loader.Row{Values: vals, Version: version, Deleted: true}
	if m.OldTupleType == pglogrepl.DeleteMessageTupleTypeOld { // REPLICA IDENTITY FULL with a key
		var err error
		if row.Old, err = rel.oldValues(m.OldTuple); err != nil {
			return err
		}
	}
	return s.add(rel, row, 0)
}

// truncate writes what came before it, then empties the tables. Replayed
// after a crash, it empties them again before the rows that followed it
// are written again, so the end state is the same.
//
// A replay must not write the changes of the transactions that committed
// before it, though, once ClickHouse is emptied: their rows would be
// removed again, but a row whose TOASTed value the update left unchanged
// takes that value from the rows stored in ClickHouse, which are gone, and
// the write fails at every start. So the truncating transaction's commit
// position is saved with the table's state before the table is emptied,
// and the stream leaves out the table's changes of earlier transactions
// (add); the truncating transaction itself is replayed whole.
func (s *stream) truncate(ctx context.Context, m *pglogrepl.TruncateMessage) error {
	if err := s.flushWithRetry(ctx); err != nil {
		return err
	}
	for _, oid := range m.RelationIDs {
		rel, ok := s.relation(oid)
		if !ok {
			continue
		}
		if err := s.settleResync(ctx, oid); err != nil {
			return err
		}
		rel = s.byOID[oid]
		if rel.tm.Source.AppendOnly || rel.copied.holds(s.txID, s.txCommit) || s.txCommit < rel.truncated {
			continue // a copy that holds the transaction was taken after the truncation, or a later one was applied
		}
		if rel.truncated != s.txCommit {
			rel.truncated = s.txCommit
			if err := s.rep.saveState(ctx, rel); err != nil {
				return err
			}
		}
		s.observe(rel, "truncate")
		if err := s.sink.Truncate(ctx, rel.tm); err != nil {
			return fmt.Errorf("truncate %s: %w", rel.ref, err)
		}
		s.log.Info("truncated", zap.Stringer("table", rel.ref))
		if err := s.truncatedLeaves(ctx, rel, s.txID); err != nil {
			return err
		}
	}
	return nil
}

func (s *stream) relation(oid uint32) (*relation, bool) {
	rel := s.byOID[oid]
	return rel, rel != nil
}

// add queues a row, first encoding the key of a FullRow table's row. It
// leaves out the rows of a transaction that a copy of the table holds
// (see copycut.go).
//
// A row's Seq numbers it among the rows that share its WAL position: the
// changes PostgreSQL decodes from one multi-insert record (COPY writes one
// per heap page), which an append-only table would otherwise keep as one
// row. They come one after another within one transaction, and PostgreSQL
// sends a transaction again only whole and in the same order, so a replay
// numbers them the same and collapses onto the first write.
func (s *stream) add(rel *relation, row loader.Row, size int) error {
	if row.Version != s.sameAt {
		s.sameAt, s.sameNext = row.Version, 0
	}
	row.Seq = s.sameNext
	s.sameNext++
	if rel.copied.holds(s.txID, s.txCommit) || s.txCommit < rel.truncated {
		return nil
	}
	if err := rel.setRowKey(&row); err != nil {
		return err
	}
	row.TxID, row.CommitMicros = s.txID, s.txCommitMicros
	s.batch.Add(rel.tm, row, size+16*len(row.Values))
	s.rows++
	if lr := s.resyncs[rel.ref.OID]; lr != nil {
		return s.shadowRow(lr, row, size+16*len(row.Values))
	}
	return nil
}

// observe counts a change for the Observer.
func (s *stream) observe(rel *relation, op string) {
	count := rel.counters[op]
	if count == nil {
		table := rel.ref.String()
		if cc, ok := s.cfg.Observer.(ChangeCounter); ok {
			count = cc.Counter(table, op)
		} else {
			count = func() { s.cfg.Observer.Change(table, op) }
		}
		if rel.counters == nil {
			rel.counters = map[string]func(){}
		}
		rel.counters[op] = count
	}
	count()
}

// parseMessage parses a pgoutput message. pglogrepl.Parse indexes into
// the data unchecked in places (an empty message makes it panic), so a
// malformed message from the server becomes an error here, not a crash.
func parseMessage(data []byte) (msg pglogrepl.Message, err error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("empty pgoutput message")
	}
	if err := checkTuples(data); err != nil {
		return nil, err
	}
	if m, ok := parseRowChange(data); ok {
		return m, nil
	}
	defer func() {
		if p := recover(); p != nil {
			msg, err = nil, fmt.Errorf("malformed pgoutput message %q…: %v", truncate(data, 32), p)
		}
	}()
	return pglogrepl.Parse(data)
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// checkTuples walks the tuples of an insert, update or delete message and
// checks that every value's length fits in the message: pglogrepl
// allocates what a length says before it reads, so a corrupt length could
// otherwise take gigabytes.
func checkTuples(data []byte) error {
	switch data[0] {
	case 'I', 'U', 'D':
	case 'T': // relation count, options, then one OID per relation
		if len(data) < 6 || int64(binaryUint32(data[1:]))*4 > int64(len(data)-6) {
			return fmt.Errorf("malformed pgoutput truncate message")
		}
		return nil
	default:
		return nil
	}
	p := 5 // type byte and relation OID
	for p < len(data) {
		switch data[p] {
		case 'K', 'O', 'N':
			n, err := tupleLen(data[p+1:])
			if err != nil {
				return fmt.Errorf("malformed pgoutput %q message: %w", data[0], err)
			}
			p += 1 + n
		default:
			return fmt.Errorf("malformed pgoutput %q message: unexpected byte %q at %d", data[0], data[p], p)
		}
	}
	return nil
}

// tupleLen returns the length of the TupleData at the start of b.
func tupleLen(b []byte) (int, error) {
	if len(b) < 2 {
		return 0, fmt.Errorf("tuple cut short")
	}
	cols, p := int(b[0])<<8|int(b[1]), 2
	for i := 0; i < cols; i++ {
		if p >= len(b) {
			return 0, fmt.Errorf("tuple cut short at column %d", i)
		}
		kind := b[p]
		p++
		if kind != pglogrepl.TupleDataTypeText && kind != pglogrepl.TupleDataTypeBinary {
			continue
		}
		if p+4 > len(b) {
			return 0, fmt.Errorf("tuple cut short at column %d", i)
		}
		n := int(binaryUint32(b[p:]))
		p += 4
		if n < 0 || n > len(b)-p {
			return 0, fmt.Errorf("column %d says %d bytes, %d are left", i, n, len(b)-p)
		}
		p += n
	}
	return p, nil
}

func binaryUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
