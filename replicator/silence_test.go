package replicator_test

import (
	"errors"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// blackHole forwards TCP connections to a server until hold is called:
// from then on the connections open at that moment stay open but carry
// nothing either way, as behind a network that drops packets without
// resetting anything. Connections made later are forwarded again.
type blackHole struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	gen    int // connections of an older generation are held
}

func newBlackHole(t *testing.T, target string) *blackHole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackHole{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go b.accept()
	return b
}

func (b *blackHole) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", b.target)
		if err != nil {
			c.Close()
			continue
		}
		b.mu.Lock()
		gen := b.gen
		b.mu.Unlock()
		go b.pump(c, s, gen)
		go b.pump(s, c, gen)
	}
}

// pump copies until its connection's generation is held, then stops
// reading without closing anything.
func (b *blackHole) pump(dst, src net.Conn, gen int) {
	buf := make([]byte, 32<<10)
	for {
		_ = src.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := src.Read(buf)
		if b.held(gen) {
			return // the connections stay open, silent
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			return
		}
	}
}

func (b *blackHole) held(gen int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return gen < b.gen
}

// hold silences every connection open now.
func (b *blackHole) hold() {
	b.mu.Lock()
	b.gen++
	b.mu.Unlock()
}

// TestSilentServer black-holes ferry's connections to PostgreSQL while a
// writer writes: ferry must notice that the walsender stopped answering,
// connect again, and end with ClickHouse equal to PostgreSQL.
func TestSilentServer(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL)`,
		`INSERT INTO items SELECT g, 0 FROM generate_series(1, 1000) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)

	u, err := url.Parse(e.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	bh := newBlackHole(t, u.Host)
	u.Host = "127.0.0.1:" + strconv.Itoa(bh.ln.Addr().(*net.TCPAddr).Port)
	// The walsender of a held connection hears nothing either: a short
	// timeout of its own ends it soon, and frees the slot for the new one.
	q := u.Query()
	q.Set("options", "-cwal_sender_timeout=3s")
	u.RawQuery = q.Encode()
	logs, seen := observer.New(zapcore.WarnLevel)
	cfg.ConnString = u.String()
	cfg.StandbyInterval = 300 * time.Millisecond
	cfg.ServerSilence = 2 * time.Second
	cfg.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), logs))
	stop := e.streamInBackground(cfg)

	write := func(from, to int) {
		for i := from; i < to; i++ {
			e.exec(`INSERT INTO items VALUES (` + strconv.Itoa(i) + `, 1) ON CONFLICT (id) DO UPDATE SET v = items.v + 1`)
		}
	}
	live := func(n string) func() bool {
		return func() bool {
			rows := e.chStrings("SELECT toString(count()) FROM " + e.table("items") + " FINAL WHERE _ferry_deleted = 0 AND id >= 2000")
			return len(rows) == 1 && rows[0][0] == n
		}
	}
	write(2000, 2100)
	// Streaming, not still starting: the silence check covers the stream.
	waitFor(t, time.Minute, "items rows 2000-2099 in ClickHouse", live("100"))
	bh.hold()
	write(2100, 2300)
	deadline := time.Now().Add(30 * time.Second)
	for seen.FilterMessage("connection lost; starting again from the last confirmed position").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("ferry did not notice in 30 s that the server went silent")
		}
		time.Sleep(100 * time.Millisecond)
	}
	write(2300, 2400)
	waitFor(t, time.Minute, "items rows 2000-2399 in ClickHouse", live("400"))
	stop()
	if counts := e.verifyAll(cfg); counts["public.items"] != 1400 {
		t.Errorf("items: %d rows, want 1400", counts["public.items"])
	}
}
