package loader

import (
	"context"
	"reflect"
	"testing"

	"github.com/ferry-cdc/ferry/schema"
)

// recordSink records the batches written to it, as table name and versions.
type recordSink struct {
	Sink
	wrote []string
}

func (s *recordSink) Write(_ context.Context, b *Batch) error {
	for _, r := range b.Rows {
		s.wrote = append(s.wrote, b.Table.Name+":"+string(rune('0'+r.Version)))
	}
	return nil
}

// TestBatcherRuns: rows are written one batch per table, in the order the
// tables first got a row and each table's rows in the order added, also
// when rows of several tables alternate, after a Drop emptied a table's
// batch, and after a flush.
func TestBatcherRuns(t *testing.T) {
	a, b := &schema.TableMap{Name: "a"}, &schema.TableMap{Name: "b"}
	sink := &recordSink{}
	bt := NewBatcher(sink, 0, 0, 0)
	add := func(tm *schema.TableMap, v uint64) { bt.Add(tm, Row{Version: v}, 1) }
	add(a, 1)
	add(a, 2)
	add(b, 3)
	add(a, 4)
	if n := bt.Drop(a, func(*Row) bool { return true }); n != 3 {
		t.Fatalf("dropped %d rows of a, want 3", n)
	}
	add(a, 5) // a's batch was emptied and removed: a new one, after b's
	add(b, 6)
	if bt.Len() != 3 {
		t.Fatalf("%d rows pending, want 3", bt.Len())
	}
	if err := bt.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	add(b, 7)
	add(a, 8)
	if err := bt.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"b:3", "b:6", "a:5", "b:7", "a:8"}
	if !reflect.DeepEqual(sink.wrote, want) {
		t.Fatalf("wrote %v, want %v", sink.wrote, want)
	}
}
