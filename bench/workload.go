package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Workloads lists every workload, in report order.
var Workloads = []string{"insert", "insert-batch", "update-spread", "update-hot"}

// appPrefix starts the application_name of every benchmark connection;
// the process id follows, so that two benchmarks on one server see each
// other, and the samplers tell their own load backends from everything
// else on a shared server.
const appPrefix = "ferry-bench"

// loadSpec is one timed load against one table.
type loadSpec struct {
	strategy Strategy
	workload string
	clients  int
	duration time.Duration
	batch    int
	payload  string
	keys     *existingKeys
	seed     uint64
	// stream0 is the first key stream; client i uses stream0+i. Every run
	// of an entry has the same streams, on a table of its own (runs on one
	// table sharing a uuidv4 stream would repeat keys and violate the
	// primary key).
	stream0 int
	clock   Clock
}

// loadResult is what the clients did.
type loadResult struct {
	txns, rows, errors int64
	firstErr           error
	latencies          []time.Duration
	elapsed            time.Duration
	started, ended     time.Time
}

// op is one transaction of a client; it returns the rows it wrote.
type op func(ctx context.Context, conn *pgxpool.Conn) (int64, error)

// clientOp builds client i's transaction.
func (l loadSpec) clientOp(i int) op {
	gen := l.strategy.generator(l.seed, l.stream0+i, l.clock)
	rng := newRand(l.seed, uint64(l.stream0+i)|1<<40)
	t := l.strategy.Qualified()
	exec := func(sql string, args func() []any) op {
		return func(ctx context.Context, c *pgxpool.Conn) (int64, error) {
			tag, err := c.Exec(ctx, sql, args()...)
			return tag.RowsAffected(), err
		}
	}
	switch l.workload {
	case "insert":
		cols, vals := "customer_id, total", "$1, $2::int / 100.0"
		if gen != nil {
			cols, vals = "id, "+cols, "$3, "+vals
		}
		if l.payload != "" {
			cols, vals = cols+", payload", vals+fmt.Sprintf(", $%d", strings.Count(vals, "$")+1)
		}
		sql := "INSERT INTO " + t + " (" + cols + ") VALUES (" + vals + ")"
		return exec(sql, func() []any {
			args := []any{rng.Int64N(1_000_000) + 1, rng.IntN(100_000)}
			if gen != nil {
				args = append(args, gen.next())
			}
			if l.payload != "" {
				args = append(args, l.payload)
			}
			return args
		})
	case "insert-batch":
		return exec(l.batchSQL(gen != nil), func() []any { return l.batchArgs(rng, gen) })
	case "update-spread":
		return exec("UPDATE "+t+" SET total = total + 0.01 WHERE id = $1", func() []any {
			return []any{l.keys.at(rng.IntN(l.keys.n))}
		})
	default: // update-hot
		hot := l.keys.at(0)
		return exec("UPDATE "+t+" SET total = total + 0.01 WHERE id = $1", func() []any { return []any{hot} })
	}
}

func (l loadSpec) batchSQL(clientKeys bool) string {
	keyType := "bigint"
	if l.strategy.kind == clientUUID {
		keyType = "uuid"
	}
	cols, sel, from := "customer_id, total", "c, v / 100.0", "unnest($1::bigint[], $2::int[]) AS u(c, v)"
	if clientKeys {
		cols, sel, from = "id, "+cols, "k, "+sel, "unnest($1::bigint[], $2::int[], $3::"+keyType+"[]) AS u(c, v, k)"
	}
	if l.payload != "" {
		cols, sel = cols+", payload", sel+", $"+fmt.Sprint(strings.Count(from, "$")+1)+"::text"
	}
	return "INSERT INTO " + l.strategy.Qualified() + " (" + cols + ") SELECT " + sel + " FROM " + from
}

func (l loadSpec) batchArgs(rng *rand.Rand, gen keyGen) []any {
	cust, tot := make([]int64, l.batch), make([]int32, l.batch)
	for i := range cust {
		cust[i], tot[i] = rng.Int64N(1_000_000)+1, rng.Int32N(100_000)
	}
	args := []any{cust, tot}
	if gen != nil {
		args = append(args, gen.batch(l.batch))
	}
	if l.payload != "" {
		args = append(args, l.payload)
	}
	return args
}

// runLoad acquires every client's connection first, so that connecting is
// not timed, then lets all clients go at once until the duration is up.
func runLoad(ctx context.Context, pool *pgxpool.Pool, l loadSpec) (loadResult, error) {
	conns := make([]*pgxpool.Conn, l.clients)
	for i := range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			for _, c := range conns[:i] {
				c.Release()
			}
			return loadResult{}, fmt.Errorf("connect load client %d: %w", i, err)
		}
		conns[i] = c
	}
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	type clientResult struct {
		txns, rows, errors int64
		err                error
		lat                []time.Duration
	}
	results := make([]clientResult, l.clients)
	start := time.Now()
	deadline := start.Add(l.duration)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := &results[i]
			do := l.clientOp(i)
			r.lat = make([]time.Duration, 0, 1<<14)
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				n, err := do(ctx, conns[i])
				if err != nil {
					r.errors++
					if r.err == nil && ctx.Err() == nil {
						r.err = err
					}
					continue
				}
				r.lat = append(r.lat, time.Since(t0))
				r.txns++
				r.rows += n
			}
		}(i)
	}
	wg.Wait()
	out := loadResult{started: start, ended: time.Now()}
	out.elapsed = out.ended.Sub(start)
	for _, r := range results {
		out.txns += r.txns
		out.rows += r.rows
		out.errors += r.errors
		if out.firstErr == nil {
			out.firstErr = r.err
		}
		out.latencies = append(out.latencies, r.lat...)
	}
	return out, ctx.Err()
}

// percentiles returns p50, p95 and p99 in milliseconds.
func percentiles(lat []time.Duration) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		i := int(p * float64(len(lat)-1))
		return float64(lat[i].Microseconds()) / 1000
	}
	return Latency{P50: at(0.50), P95: at(0.95), P99: at(0.99)}
}
