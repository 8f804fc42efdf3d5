package kafka

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/netdial"
)

// TestBrokerDial: the connections the writer's transport and the reader's
// dialer open carry TCP_USER_TIMEOUT.
func TestBrokerDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	c := Client{Brokers: []string{ln.Addr().String()}}
	for name, dial := range map[string]func(context.Context, string, string) (net.Conn, error){
		"transport": c.transport().Dial,
		"dialer":    c.dialer().DialFunc,
	} {
		conn, err := dial(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f, ok := conn.(*firstReplyConn); ok {
			conn = f.Conn
		}
		if d, err := netdial.UserTimeoutOf(conn); err != nil || d != time.Minute {
			t.Errorf("%s: TCP_USER_TIMEOUT = %s (%v), want 1m", name, d, err)
		}
		conn.Close()
	}
}

// TestBrokerNotKafka gives the servers of the local stack, which speak
// other protocols, as brokers: Ping fails at once with an error naming
// the address, and the process does not read their answers as Kafka
// lengths (before the first-reply check, kafka-go allocated gigabytes on
// PostgreSQL's answer).
func TestBrokerNotKafka(t *testing.T) {
	pgURL := os.Getenv("FERRY_PG_URL")
	if pgURL == "" {
		t.Skip("FERRY_PG_URL is not set: run `make stack-up` and `. .stack/env` (make test does both)")
	}
	pg, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	// (ClickHouse's native port answers nothing until its own hello: a
	// timeout, which names the address already.)
	for name, addr := range map[string]string{"postgres": pg.Host} {
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := Client{Brokers: []string{addr}}.Ping(ctx)
		cancel()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		t.Logf("%s (%s): %v; %d MiB allocated", name, addr, err, (after.TotalAlloc-before.TotalAlloc)>>20)
		var nk *notKafkaError
		if !errors.As(err, &nk) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "--kafka-brokers") {
			t.Errorf("%s: Ping = %v, want the error that %s is not Kafka, naming --kafka-brokers", name, err, addr)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Errorf("%s: Ping allocated %d MiB: an answer was read as Kafka", name, grew>>20)
		}
	}
}
