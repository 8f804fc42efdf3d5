package clickhouse

import (
	"context"
	"crypto/tls"
	"os"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/ferry-cdc/ferry/internal/netdial"
)

// TestDialer dials the stack's ClickHouse through the dialer the sink
// gives the client, plain and with TLS: the connection carries
// TCP_USER_TIMEOUT, and TLS is still set up with the DSN's settings.
func TestDialer(t *testing.T) {
	plain, secure, ca := os.Getenv("FERRY_CH_URL"), os.Getenv("FERRY_CH_TLS_URL"), os.Getenv("FERRY_TLS_CA")
	if plain == "" || secure == "" || ca == "" {
		t.Skip("FERRY_CH_URL, FERRY_CH_TLS_URL and FERRY_TLS_CA are not set: run `make stack-up` and `. .stack/env`")
	}
	for _, c := range []struct {
		dsn   string
		caF   string
		isTLS bool
	}{{plain, "", false}, {secure, ca, true}} {
		opts, err := ch.ParseDSN(c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		if err := applyTLS(opts, Config{CAFile: c.caF}); err != nil {
			t.Fatal(err)
		}
		setDialer(opts)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := opts.DialContext(ctx, opts.Addr[0])
		cancel()
		if err != nil {
			t.Fatalf("dial %s: %v", opts.Addr[0], err)
		}
		tc, isTLS := conn.(*tls.Conn)
		if isTLS != c.isTLS {
			t.Errorf("%s: TLS = %v, want %v", opts.Addr[0], isTLS, c.isTLS)
		}
		if isTLS {
			if err := tc.Handshake(); err != nil {
				t.Errorf("%s: TLS handshake: %v", opts.Addr[0], err)
			}
		}
		if d, err := netdial.UserTimeoutOf(conn); err != nil || d != time.Minute {
			t.Errorf("%s: TCP_USER_TIMEOUT = %s (%v), want 1m", opts.Addr[0], d, err)
		}
		conn.Close()
	}
}
