package replicator

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// stackConn connects an internal test to the local stack's PostgreSQL
// (FERRY_PG_URL), skipping the test without one. ctx ends after timeout or
// with the test, and conn closes with it.
func stackConn(t *testing.T, timeout time.Duration) (ctx context.Context, url string, conn *pgx.Conn) {
	t.Helper()
	url = os.Getenv("FERRY_PG_URL")
	if url == "" {
		t.Skip("FERRY_PG_URL is not set: run `make stack-up` and `. .stack/env` (make test does both)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	conn, err := connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return ctx, url, conn
}
