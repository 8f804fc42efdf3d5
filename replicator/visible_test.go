package replicator

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestAwaitVisible: the wait for a received transaction lasts while the
// transaction is running and ends once it commits. (The moment between a
// commit record on disk and the transaction's end, which the wait is for,
// is too short to hold from outside; an open transaction stands in for it.)
func TestAwaitVisible(t *testing.T) {
	url := os.Getenv("FERRY_PG_URL")
	if url == "" {
		t.Skip("FERRY_PG_URL is not set: run `make stack-up` and `. .stack/env` (make test does both)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writer, err := connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(context.Background())
	reader, err := connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(context.Background())
	if _, err := writer.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	var xid int64
	if err := writer.QueryRow(ctx, `SELECT txid_current() % 4294967296`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	s := &stream{inTx: true, txID: uint32(xid)}
	done := make(chan error, 1)
	go func() { done <- s.awaitVisible(ctx, reader) }()
	select {
	case err := <-done:
		t.Fatalf("awaitVisible returned while transaction %d was running: %v", xid, err)
	case <-time.After(time.Second):
	}
	if _, err := writer.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("awaitVisible after the commit: %v", err)
	}
	if ok, err := xidVisible(ctx, reader, 3); err != nil || !ok { // the first transaction ID ever given
		t.Errorf("xidVisible(3) = %v, %v; want true", ok, err)
	}
}
