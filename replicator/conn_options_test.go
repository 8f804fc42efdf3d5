package replicator

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ferry-cdc/ferry/internal/netdial"
)

// userTimeoutOf is TCP_USER_TIMEOUT of c in milliseconds.
func userTimeoutOf(t *testing.T, c net.Conn) int {
	t.Helper()
	d, err := netdial.UserTimeoutOf(c)
	if err != nil {
		t.Fatal(err)
	}
	return int(d.Milliseconds())
}

// TestConnOptions: ferry's connections to PostgreSQL, the SQL one and the
// replication one, carry TCP_USER_TIMEOUT (a minute, or the URL's
// tcp_user_timeout), and a bad tcp_user_timeout is refused by name.
func TestConnOptions(t *testing.T) {
	ctx, url, conn := stackConn(t, 30*time.Second)
	if got := userTimeoutOf(t, conn.PgConn().Conn()); got != 60000 {
		t.Errorf("SQL connection: TCP_USER_TIMEOUT = %d ms, want 60000", got)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	rconn, err := connectReplication(ctx, url+sep+"tcp_user_timeout=2500")
	if err != nil {
		t.Fatal(err)
	}
	defer rconn.Close(ctx)
	if got := userTimeoutOf(t, rconn.Conn()); got != 2500 {
		t.Errorf("replication connection with tcp_user_timeout=2500: TCP_USER_TIMEOUT = %d ms", got)
	}
	if _, err := connect(ctx, url+sep+"tcp_user_timeout=soon"); err == nil || !strings.Contains(err.Error(), `tcp_user_timeout="soon"`) {
		t.Errorf("a bad tcp_user_timeout: %v, want an error naming it", err)
	}
	cfg, err := pgconn.ParseConfig(url + sep + "tcp_user_timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	if err := setConnOptions(cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.RuntimeParams["tcp_user_timeout"]; ok {
		t.Error("tcp_user_timeout is libpq's setting, yet it would be sent to the server")
	}
}
