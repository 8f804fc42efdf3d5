package replicator

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
)

// walData handles one pgoutput message.
func (s *stream) walData(ctx context.Context, xld pglogrepl.XLogData) error {
	msg, err := pglogrepl.Parse(xld.WALData)
	if err != nil {
		return fmt.Errorf("slot %s: parse pgoutput message at %s: %w", s.cfg.Slot, xld.WALStart, err)
	}
	version := uint64(xld.WALStart)
	switch m := msg.(type) {
	case *pglogrepl.BeginMessage:
		s.inTx = true
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
	if s.cfg.CatchUp && s.lastEnd >= s.target {
		if err := s.flush(ctx); err != nil {
			return err
		}
		return errCaughtUp
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
	return s.add(rel, loader.Row{Values: vals, Version: version}, size)
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
	if m.OldTuple != nil && !rel.tm.Source.AppendOnly && rel.keyChanged(m.OldTuple, m.NewTuple) {
		gone, err := rel.keyValues(m.OldTuple)
		if err != nil {
			return err
		}
		if err := s.add(rel, loader.Row{Values: gone, Version: version, Deleted: true}, 0); err != nil {
			return err
		}
	}
	vals, size, err := rel.values(m.NewTuple, old)
	if err != nil {
		return err
	}
	return s.add(rel, loader.Row{Values: vals, Version: version}, size)
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
	row := loader.Row{Values: newVals, Version: version}
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
	return s.add(rel, loader.Row{Values: vals, Version: version, Deleted: true}, 0)
}

// truncate writes what came before it, then empties the tables. Replayed
// after a crash, it empties them again before the rows that followed it
// are written again, so the end state is the same.
func (s *stream) truncate(ctx context.Context, m *pglogrepl.TruncateMessage) error {
	if err := s.flushWithRetry(ctx); err != nil {
		return err
	}
	for _, oid := range m.RelationIDs {
		rel, ok := s.relation(oid)
		if !ok || rel.tm.Source.AppendOnly {
			continue
		}
		s.observe(rel, "truncate")
		if err := s.sink.Truncate(ctx, rel.tm); err != nil {
			return fmt.Errorf("truncate %s: %w", rel.ref, err)
		}
		s.log.Info("truncated", zap.Stringer("table", rel.ref))
	}
	return nil
}

func (s *stream) relation(oid uint32) (*relation, bool) {
	rel := s.byOID[oid]
	return rel, rel != nil
}

// add queues a row, first encoding the key of a FullRow table's row.
func (s *stream) add(rel *relation, row loader.Row, size int) error {
	if err := rel.setRowKey(&row); err != nil {
		return err
	}
	s.batch.Add(rel.tm, row, size+16*len(row.Values))
	s.rows++
	return nil
}

// observe counts a change for the Observer.
func (s *stream) observe(rel *relation, op string) {
	s.cfg.Observer.Change(rel.ref.String(), op)
}
