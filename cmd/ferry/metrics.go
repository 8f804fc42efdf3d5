package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/replicator"
)

var (
	_ replicator.Observer      = (*observer)(nil)
	_ replicator.SlotObserver  = (*observer)(nil)
	_ replicator.TableObserver = (*observer)(nil)
)

// observer turns what the replicator reports into Prometheus metrics, the
// progress `ferry status` reads, and the initial copy's progress display.
// Its methods are called from several goroutines.
type observer struct {
	reg      *prometheus.Registry
	changes  *prometheus.CounterVec
	batch    prometheus.Histogram
	flush    prometheus.Histogram
	e2e      prometheus.Histogram
	snapRows *prometheus.GaugeVec
	snapEst  *prometheus.GaugeVec
	snapDone *prometheus.GaugeVec
	retries  *prometheus.CounterVec
	errs     *prometheus.CounterVec
	retained prometheus.Gauge
	over     prometheus.Gauge
	unlim    prometheus.Gauge
	active   prometheus.Gauge

	copy *copyProgress
	book *statusBook // per table, for the status page

	mu         sync.Mutex
	serverWAL  pglogrepl.LSN
	confirmed  pglogrepl.LSN
	caughtUpTo time.Time // everything committed before it is in ClickHouse
	heartbeat  time.Time // emission time of the last heartbeat received
	streaming  bool
	lastErr    string
	errTime    time.Time
	errKind    string // as ferry_retries_total's or ferry_errors_total's kind
	errStopped bool   // the last error ended replication
	retryCount uint64
	health     *replicator.SlotHealth // the slot watcher's last reading
}

func newObserver(copy *copyProgress) *observer {
	o := &observer{reg: prometheus.NewRegistry(), copy: copy, book: newStatusBook()}
	f := promFactory{o.reg}
	o.changes = f.counterVec("ferry_changes_total", "Changes decoded from the stream, by table and operation (insert, update, delete, truncate).", "table", "op")
	o.batch = f.histogram("ferry_batch_rows", "Rows written per flush.", prometheus.ExponentialBuckets(1, 4, 10))
	o.flush = f.histogram("ferry_flush_duration_seconds", "Time to write one flush to ClickHouse, retries included.", prometheus.ExponentialBuckets(0.001, 2.5, 14))
	o.e2e = f.histogram("ferry_heartbeat_latency_seconds", "End-to-end latency: from writing a heartbeat into PostgreSQL's WAL to receiving it from the slot.", prometheus.ExponentialBuckets(0.001, 2.5, 14))
	o.snapRows = f.gaugeVec("ferry_snapshot_rows", "Rows copied so far by the initial copy, by table.", "table")
	o.snapEst = f.gaugeVec("ferry_snapshot_rows_estimate", "PostgreSQL's row estimate of each table of the initial copy.", "table")
	o.snapDone = f.gaugeVec("ferry_snapshot_done", "1 once the initial copy of the table finished.", "table")
	o.retries = f.counterVec("ferry_retries_total", "Failed attempts that were retried, by kind (clickhouse, postgres).", "kind")
	o.errs = f.counterVec("ferry_errors_total", "Errors that stopped replication, by kind (clickhouse, postgres, slot_lost, other).", "kind")
	o.retained = f.gauge("ferry_slot_retained_wal_bytes", "WAL the slot keeps on PostgreSQL's disk: pg_current_wal_lsn() - restart_lsn.")
	o.over = f.gauge("ferry_slot_retained_wal_over_limit", "1 when the slot retains more WAL than --max-retained-wal.")
	o.unlim = f.gauge("ferry_slot_wal_keep_size_unlimited", "1 when max_slot_wal_keep_size is -1, so a stopped ferry's slot can fill the disk.")
	o.active = f.gauge("ferry_slot_active", "1 when a walsender streams from the slot.")
	f.gaugeFunc("ferry_lag_bytes", "WAL between the server's end (as the stream last reported it) and the position ferry confirmed.", func() float64 {
		if l := o.lag(); l.Bytes != nil {
			return float64(*l.Bytes)
		}
		return 0
	})
	f.gaugeFunc("ferry_lag_seconds", "Now minus a time before which every committed transaction is in ClickHouse "+
		"(the last confirmed transaction's commit time, or the time an idle stream was confirmed).", func() float64 {
		if l := o.lag(); l.Seconds != nil {
			return *l.Seconds
		}
		return 0
	})
	f.gaugeFunc("ferry_confirmed_lsn", "The position last confirmed to PostgreSQL, as a number.", func() float64 {
		o.mu.Lock()
		defer o.mu.Unlock()
		return float64(o.confirmed)
	})
	f.gaugeFunc("ferry_last_heartbeat_timestamp_seconds", "Emission time of the last heartbeat received from the slot.", func() float64 {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.heartbeat.IsZero() {
			return 0
		}
		return float64(o.heartbeat.UnixNano()) / 1e9
	})
	info := f.gaugeVec("ferry_build_info", "ferry's version.", "version")
	info.WithLabelValues(version).Set(1)
	o.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return o
}

func (o *observer) Change(table, op string) {
	o.changes.WithLabelValues(table, op).Inc()
	o.book.change(table, op)
}

// Counter is Change for one table and op, looked up once: looking the
// counter up by its labels at every change was 5 % of a catch-up's CPU.
func (o *observer) Counter(table, op string) func() {
	c := o.changes.WithLabelValues(table, op)
	count := o.book.counter(table, op)
	return func() {
		c.Inc()
		count()
	}
}

func (o *observer) Flushed(rows int, took time.Duration) {
	o.batch.Observe(float64(rows))
	o.flush.Observe(took.Seconds())
	o.book.written(time.Now())
}

func (o *observer) Tables(tables []replicator.ReplicatedTable) { o.book.setTables(tables) }

func (o *observer) Confirmed(lsn pglogrepl.LSN, commitTime time.Time) {
	o.book.written(time.Now()) // nothing received is still only in memory
	o.mu.Lock()
	defer o.mu.Unlock()
	o.confirmed = lsn
	o.streaming = true
	if commitTime.IsZero() {
		// Confirmed from an idle stream: everything committed before the
		// server's last report is stored.
		commitTime = time.Now()
	}
	o.caughtUpTo = commitTime
}

func (o *observer) ServerWAL(lsn pglogrepl.LSN) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.serverWAL = max(o.serverWAL, lsn)
	o.streaming = true
}

func (o *observer) Heartbeat(emitted time.Time) {
	o.e2e.Observe(max(time.Since(emitted).Seconds(), 0))
	o.mu.Lock()
	defer o.mu.Unlock()
	o.heartbeat = emitted
}

func (o *observer) SnapshotProgress(table string, rows, total uint64, done bool) {
	o.snapRows.WithLabelValues(table).Set(float64(rows))
	o.snapEst.WithLabelValues(table).Set(float64(total))
	if done {
		o.snapDone.WithLabelValues(table).Set(1)
	}
	if o.copy != nil {
		o.copy.update(table, rows, total, done)
	}
	o.book.copyProgress(table, rows, total, done, time.Now())
}

func (o *observer) Retry(kind string, err error) {
	o.retries.WithLabelValues(kind).Inc()
	o.setError(kind, err, false)
}

func (o *observer) SlotHealth(h replicator.SlotHealth) {
	o.retained.Set(float64(h.RetainedBytes))
	o.over.Set(b2f(h.OverLimit))
	o.unlim.Set(b2f(h.Unlimited))
	o.active.Set(b2f(h.Active))
	o.mu.Lock()
	defer o.mu.Unlock()
	o.health = &h
}

// stopped counts the error that ended replication.
func (o *observer) stopped(kind string, err error) {
	o.errs.WithLabelValues(kind).Inc()
	o.setError(kind, err, true)
}

func (o *observer) setError(kind string, err error, stopped bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastErr, o.errTime, o.errKind, o.errStopped = err.Error(), time.Now(), kind, stopped
	if !stopped {
		o.retryCount++
	}
}

func (o *observer) ready() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streaming
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// serveMetrics serves /metrics, /healthz (the process answers) and /readyz
// (the initial copy is done and the stream runs) on addr until ctx is done,
// and the status page (/ and /status.json) when page is not nil.
func serveMetrics(ctx context.Context, addr string, o *observer, log *zap.Logger, page *statusPage) error {
	mux := http.NewServeMux()
	if page != nil {
		page.register(mux)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !o.ready() {
			http.Error(w, "not streaming yet (initial copy, or connecting)", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics endpoint (--metrics-addr %s; empty disables it): %w", addr, err)
	}
	fields := []zap.Field{zap.String("addr", ln.Addr().String())}
	if page != nil {
		go page.sample(ctx)
		fields = append(fields, zap.String("status_page", "http://"+ln.Addr().String()+"/"))
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Info("serving metrics", fields...)
	if !isLoopback(ln.Addr()) {
		log.Warn("the metrics endpoint is reachable from other hosts, without authentication: bind it to 127.0.0.1 unless a firewall or a network policy guards it",
			zap.String("addr", ln.Addr().String()))
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// isLoopback reports whether a listener's address is on the loopback
// interface only.
func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// promFactory registers metrics as it makes them.
type promFactory struct{ reg *prometheus.Registry }

func (f promFactory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f promFactory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}

func (f promFactory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f promFactory) gaugeFunc(name, help string, fn func() float64) {
	f.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}

func (f promFactory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}
