package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// source is the test's database on the shared PostgreSQL, with one table
// public.items (id bigint key, v text, n int).
type source struct {
	url  string // of the database
	name string // the database, and ferry's slot, publication and ClickHouse database
}

func newSource(t *testing.T, ctx context.Context, seed int) *source {
	t.Helper()
	base := os.Getenv("FERRY_PG_URL")
	name := fmt.Sprintf("ferry_cluster_%d_%d", os.Getpid(), rand.IntN(1_000_000))
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to FERRY_PG_URL: %v", err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	s := &source{url: u.String(), name: name}
	t.Cleanup(func() { s.drop(base) })
	s.exec(t, ctx, "CREATE TABLE items (id bigint PRIMARY KEY, v text NOT NULL, n int NOT NULL)",
		fmt.Sprintf("INSERT INTO items SELECT g, 'seed-' || g, g %% 97 FROM generate_series(1, %d) g", seed))
	return s
}

func (s *source) exec(t *testing.T, ctx context.Context, stmts ...string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// drop removes the slot (ending whoever holds it) and the database.
func (s *source) drop(base string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	_, _ = conn.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", s.name)
	for i := 0; i < 50; i++ {
		if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", s.name); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+s.name+" WITH (FORCE)")
}

// rows reads the table: id → "v|n".
func (s *source) rows(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	r, err := conn.Query(ctx, "SELECT id::text, v, n::text FROM items")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for r.Next() {
		var id, v, n string
		if err := r.Scan(&id, &v, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = v + "|" + n
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// writer changes the table in small transactions until stopped: each
// inserts two rows, updates two and deletes one.
type writer struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	txs     int
	inserts int
	updates int
	deletes int
	next    int // the next id to insert
	err     error
}

func startWriter(ctx context.Context, s *source, firstID int) *writer {
	w := &writer{stop: make(chan struct{}), done: make(chan struct{}), next: firstID}
	go func() {
		defer close(w.done)
		conn, err := pgx.Connect(ctx, s.url)
		if err != nil {
			w.err = err
			return
		}
		defer conn.Close(context.Background())
		next := firstID
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
			a, b := rand.IntN(next-1)+1, rand.IntN(next-1)+1
			batch := &pgx.Batch{}
			batch.Queue("INSERT INTO items VALUES ($1, $2, $3), ($4, $5, $6)", next, fmt.Sprint("new-", next), next%89, next+1, fmt.Sprint("new-", next+1), (next+1)%89)
			batch.Queue("UPDATE items SET v = v || '+', n = n + 1 WHERE id IN ($1, $2)", a, b)
			batch.Queue("DELETE FROM items WHERE id = $1", rand.IntN(next-1)+1)
			if err := conn.SendBatch(ctx, batch).Close(); err != nil {
				w.err = err
				return
			}
			next += 2
			w.mu.Lock()
			w.txs++
			w.inserts += 2
			w.updates += 2
			w.deletes++
			w.next = next
			w.mu.Unlock()
		}
	}()
	return w
}

// halt stops the writer and returns what it did.
func (w *writer) halt(t *testing.T) string {
	t.Helper()
	close(w.stop)
	<-w.done
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	return fmt.Sprintf("%d transactions (%d inserts, %d updates, %d deletes)", w.txs, w.inserts, w.updates, w.deletes)
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.txs
}

// ferryProc is a `ferry run` subprocess.
type ferryProc struct {
	cmd    *exec.Cmd
	out    *testkit.Buffer
	exited chan struct{}
	err    error
}

func startFerry(t *testing.T, bin string, out *testkit.Buffer, args ...string) *ferryProc {
	t.Helper()
	fmt.Fprintf(out, "--- ferry %s\n", strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &ferryProc{cmd: cmd, out: out, exited: make(chan struct{})}
	go func() { f.err = cmd.Wait(); close(f.exited) }()
	t.Cleanup(func() { f.stop(t) })
	return f
}

// stop sends SIGTERM (ferry flushes, confirms and exits 0) and waits.
func (f *ferryProc) stop(t *testing.T) {
	select {
	case <-f.exited:
		return
	default:
	}
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.exited:
	case <-time.After(90 * time.Second):
		_ = f.cmd.Process.Kill()
		<-f.exited
		t.Errorf("ferry did not exit within 90 s of SIGTERM")
	}
}

// mustRun fails the test when ferry has exited.
func (f *ferryProc) mustRun(t *testing.T) {
	t.Helper()
	select {
	case <-f.exited:
		t.Fatalf("ferry exited: %v", f.err)
	default:
	}
}

// wait waits for ferry to exit on its own.
func (f *ferryProc) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-f.exited:
		return f.err
	case <-time.After(d):
		t.Fatalf("ferry did not exit within %s", d)
		return nil
	}
}

// diff counts the rows of want missing from got, those got has in
// excess, and those that differ; it describes a few of each.
func diff(want, got map[string]string) (missing, extra, differ int, sample string) {
	var notes []string
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			missing++
			notes = append(notes, "missing id "+k)
		case g != v:
			differ++
			notes = append(notes, fmt.Sprintf("id %s: %q, want %q", k, g, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra++
			notes = append(notes, "extra id "+k)
		}
	}
	sort.Strings(notes)
	if len(notes) > 5 {
		notes = notes[:5]
	}
	return missing, extra, differ, strings.Join(notes, "; ")
}
