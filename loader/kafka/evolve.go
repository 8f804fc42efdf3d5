package kafka

import (
	"context"
	"errors"
	"fmt"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

var _ loader.Evolver = (*Sink)(nil)

// errRebuild is the loader's error for a description that cannot be
// applied in place and did not come with a copy: the publisher always sends
// one (a truncation carrying the new description, then the rows), so this
// means a publisher older than the loader, or a topic written by hand.
var errRebuild = errors.New("kafka: this schema change needs the ClickHouse table rebuilt, " +
	"but the topic brings no copy of the table with the new columns; upgrade the publisher (ferry run --sink kafka), " +
	"then drop the loader's ClickHouse table and reset the group's offsets to reload")

// errCopyRenamed is what AlterTable answers for a renamed table, so that
// the replicator copies it onto its new topic instead (its answer to a
// failed in-place change).
var errCopyRenamed = errors.New("kafka: a renamed table moves to a new topic, which needs a copy of the table: copying it")

// AlterTable publishes the new description of the table at this point of
// the stream; the loader alters its ClickHouse table when the first row
// that refers to it arrives (rows written before it refer to the old one).
// For a table renamed since its last copy it fails with errCopyRenamed.
func (s *Sink) AlterTable(ctx context.Context, tm *schema.TableMap, _ []schema.ColumnChange) error {
	if s.renamed[tm.Name] {
		return fmt.Errorf("%s: %w", tm.Source.QualifiedName(), errCopyRenamed)
	}
	_, err := s.table(ctx, tm)
	return err
}

// RenameTable ends the old topic with a drop marker (truncation messages
// with HeaderDrop naming the new topic), and makes the AlterTable that
// follows in the replicator fail, so that the replicator rebuilds the
// table: the copy goes to the new topic, starting with its own truncation.
// A rename is thus a drop of the old ClickHouse table and a copy into the
// new one; rows changed meanwhile reach the new topic after the copy.
func (s *Sink) RenameTable(ctx context.Context, from, to *schema.TableMap) error {
	if from.Name == to.Name {
		return nil
	}
	old, err := s.table(ctx, from)
	if err != nil {
		return err
	}
	topic := TableTopic(s.cfg.TopicPrefix, to.Source.Schema, to.Source.Name)
	if err := s.marker(ctx, old, false, []kafkago.Header{{Key: HeaderDrop, Value: []byte(topic)}}); err != nil {
		return fmt.Errorf("kafka: publish the end of %s (renamed to %s): %w", old.topic, topic, err)
	}
	s.renamed[to.Name] = true
	s.log.Info("table renamed: its old topic ends here and a copy goes to the new one",
		zap.String("from", old.topic), zap.String("to", topic))
	return nil
}

// SwapTable has nothing to do: the shadow's rows went to the table's own
// topic after a truncation carrying the new description, which is where a
// loader replaces its table.
func (s *Sink) SwapTable(context.Context, *schema.TableMap, *schema.TableMap) error { return nil }

// Matches reports every table as present and matching: topics take rows of
// any shape (each message names its description), so a restart need not
// copy anything again.
func (s *Sink) Matches(context.Context, *schema.TableMap) (bool, bool, error) { return true, true, nil }

// Replace is never called, as Matches says every table matches; were it,
// truncating would do, as the next rows carry the description.
func (s *Sink) Replace(ctx context.Context, tm *schema.TableMap) error { return s.Truncate(ctx, tm) }

// realName is the ClickHouse name of the table a mapping is for: a
// rebuild's shadow mapping has another name, the same source table.
func realName(tm *schema.TableMap) string {
	return schema.CHTableName(tm.Source.Schema, tm.Source.Name)
}
