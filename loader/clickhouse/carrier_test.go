package clickhouse

import (
	"slices"
	"strings"
	"testing"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// carrier is the row the Kafka loader queues just before the old key's
// delete of a key change at version: a deleted row of the new key, one
// version below, its unchanged columns Unchanged.
func carrier(tm *schema.TableMap, version uint64, key int64) loader.Row {
	r := deleted(tm, version-1, key)
	r.Values[1] = loader.Unchanged
	return r
}

// TestUnchangedCarrier: through Kafka the old key's delete and the new
// key's row of a key change come in different batches, in either order of
// the keys' other rows; the carrier written with the delete holds the old
// key's value for the new row. Versions are spaced as WAL positions are.
func TestUnchangedCarrier(t *testing.T) {
	s := testSink(t)
	tm := mapTable(t, s, kvTable("carrier"))
	big1, big2, big3 := randomText(20_000), randomText(20_000), randomText(20_000)
	write(t, s, tm, loader.Row{Values: conv(t, tm, "1", big1, "1"), Version: 100},
		loader.Row{Values: conv(t, tm, "2", big2, "1"), Version: 100},
		loader.Row{Values: conv(t, tm, "3", big3, "1"), Version: 100})

	// Key 1 moves to 10: the carrier and the delete first, the new row
	// in a later batch. The carrier is not a live row.
	moveDelete := []loader.Row{carrier(tm, 200, 10), deleted(tm, 200, int64(1))}
	write(t, s, tm, moveDelete...)
	wantLive(t, s, tm, conv(t, tm, "2", big2, "1"), conv(t, tm, "3", big3, "1"))
	// Another loader of the group, which read the old key's partition
	// again, writes the three rows together: the old key is deleted in
	// ClickHouse already, but the carrier is there.
	moveRow := loader.Row{Values: conv(t, tm, "10", loader.Unchanged, "2"), Version: 200}
	write(t, s, tm, append(slices.Clone(moveDelete), moveRow)...)
	wantLive(t, s, tm, conv(t, tm, "10", big1, "2"), conv(t, tm, "2", big2, "1"), conv(t, tm, "3", big3, "1"))

	// Key 2 moves to 20, whose older rows (inserted, deleted) come after
	// the carrier in the batch, from the new key's partition: the new row
	// takes the carrier's value, the latest version below its own.
	write(t, s, tm, carrier(tm, 300, 20), deleted(tm, 300, int64(2)),
		loader.Row{Values: conv(t, tm, "20", "old", "0"), Version: 150}, deleted(tm, 160, int64(20)),
		loader.Row{Values: conv(t, tm, "20", loader.Unchanged, "3"), Version: 300})
	wantLive(t, s, tm, conv(t, tm, "10", big1, "2"), conv(t, tm, "20", big2, "3"), conv(t, tm, "3", big3, "1"))

	// Replays, after ClickHouse merged the old versions away: the carrier
	// after its new row, the carrier alone, then its new row.
	write(t, s, tm, loader.Row{Values: conv(t, tm, "30", "x", "0"), Version: 120}, deleted(tm, 130, int64(30)))
	write(t, s, tm, carrier(tm, 400, 30), deleted(tm, 400, int64(3)))
	if err := s.conn.Exec(ctxT(t), "OPTIMIZE TABLE "+s.table(tm.Name)+" FINAL"); err != nil {
		t.Fatal(err)
	}
	write(t, s, tm, moveDelete...)
	write(t, s, tm, moveRow)
	write(t, s, tm, carrier(tm, 400, 30), deleted(tm, 400, int64(3)))
	write(t, s, tm, loader.Row{Values: conv(t, tm, "30", loader.Unchanged, "4"), Version: 400})
	wantLive(t, s, tm, conv(t, tm, "10", big1, "2"), conv(t, tm, "20", big2, "3"), conv(t, tm, "30", big3, "4"))

	// A carrier whose old key ClickHouse does not hold names both keys.
	err := s.Write(ctxT(t), &loader.Batch{Table: tm, Rows: []loader.Row{carrier(tm, 600, 60), deleted(tm, 600, int64(99))}})
	if err == nil || IsRetryable(err) || !strings.Contains(err.Error(), "from key (id=99) to key (id=60)") {
		t.Fatalf("a carrier without its old key: %v, want a terminal error naming both keys", err)
	}

	// A new row of a key change whose carrier is not there has no value.
	err = s.Write(ctxT(t), &loader.Batch{Table: tm, Rows: []loader.Row{
		{Values: conv(t, tm, "40", loader.Unchanged, "1"), Version: 500}}})
	if err == nil || IsRetryable(err) {
		t.Fatalf("a new row without its carrier: %v, want a terminal error", err)
	}
}
