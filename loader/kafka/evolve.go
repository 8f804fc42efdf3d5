package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

var _ loader.Evolver = (*Sink)(nil)

// errRebuild is the error for schema changes the Kafka transport does not
// carry yet: those the direct path applies by copying the table into a
// new one and swapping it in.
var errRebuild = errors.New("kafka: this schema change needs the ClickHouse table rebuilt or renamed, " +
	"which the Kafka transport does not support yet; stop ferry, drop the loader's ClickHouse table, " +
	"and start ferry run --sink kafka with a new --slot to publish a fresh copy")

// AlterTable publishes the new description of the table at this point of
// the stream; the loader alters its ClickHouse table when the first row
// that refers to it arrives (rows written before it refer to the old one).
func (s *Sink) AlterTable(ctx context.Context, tm *schema.TableMap, _ []schema.ColumnChange) error {
	_, err := s.table(ctx, tm)
	return err
}

// RenameTable accepts a mapping whose ClickHouse name is unchanged and
// refuses a rename, which would move the table to another topic.
func (s *Sink) RenameTable(_ context.Context, from, to *schema.TableMap) error {
	if from.Name == to.Name {
		return nil
	}
	return fmt.Errorf("rename %s to %s: %w", from.Source.QualifiedName(), to.Source.QualifiedName(), errRebuild)
}

// SwapTable is refused: see errRebuild.
func (s *Sink) SwapTable(_ context.Context, target, _ *schema.TableMap) error {
	return fmt.Errorf("rebuild %s: %w", target.Source.QualifiedName(), errRebuild)
}

// Matches reports every table as present and matching: topics take rows of
// any shape (each message names its description), so a restart need not
// copy anything again.
func (s *Sink) Matches(context.Context, *schema.TableMap) (bool, bool, error) { return true, true, nil }

// Replace is never needed, as Matches says every table matches.
func (s *Sink) Replace(_ context.Context, tm *schema.TableMap) error {
	return fmt.Errorf("replace %s: %w", tm.Source.QualifiedName(), errRebuild)
}

// isShadow reports whether a mapping is a copy the replicator writes under
// another name to swap it in later (a rebuild), not the table itself.
func isShadow(tm *schema.TableMap) bool {
	return tm.Name != schema.CHTableName(tm.Source.Schema, tm.Source.Name)
}
