package kafka

import (
	"context"
	"net"
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
		if d, err := netdial.UserTimeoutOf(conn); err != nil || d != time.Minute {
			t.Errorf("%s: TCP_USER_TIMEOUT = %s (%v), want 1m", name, d, err)
		}
		conn.Close()
	}
}
