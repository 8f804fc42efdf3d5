package replicator

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// Replicator copies and then streams one database into a sink.
type Replicator struct {
	cfg   Config
	sink  loader.Sink
	store loader.SnapshotStore
	caps  schema.Capabilities
	log   *zap.Logger
	// Retryable tells a transient sink error (retried with backoff) from a
	// terminal one. Default: every error is terminal.
	retryable func(error) bool
	textCols  map[string]map[string]bool // Config.TextColumns by schema.table
	filters   map[string]*tableFilter    // Config.ExcludeColumns and RowFilters by schema.table
	// publishedKept: a table's kept columns are those of its publication's
	// column list, which leaves out columns added since (Tables, for verify).
	publishedKept bool
	// connected: a cycle reached PostgreSQL once. Until then a failure to
	// connect ends Run instead of being retried.
	connected bool
	// memberEvery, when not 0, replaces membershipEvery (tests).
	memberEvery time.Duration
	// recheckTo is the WAL position of the last request a stale copy wrote
	// (see recheckStale): a catch-up run streams at least to it.
	recheckTo pglogrepl.LSN
	// recopies counts the copies made again after the decoder failed
	// (recopyAfterDecoderFailure); decoderFaults is a test's count of
	// decoder failures to feign (export_test.go).
	recopies, decoderFaults int
	// textStream: a stream in binary format met a table ferry reads in
	// text (errStreamText); the streams of this run are in text format.
	textStream bool
}

var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// New returns a Replicator. caps are the destination's capabilities, which
// decide the type mapping; retryable may be nil.
func New(cfg Config, sink loader.Sink, store loader.SnapshotStore, caps schema.Capabilities, retryable func(error) bool) (*Replicator, error) {
	cfg = cfg.withDefaults()
	if cfg.ConnString == "" {
		return nil, fmt.Errorf("no PostgreSQL URL: set --pg or FERRY_PG_URL")
	}
	if !slotName.MatchString(cfg.Slot) {
		return nil, fmt.Errorf("slot name %q: PostgreSQL allows only lower-case letters, digits and underscores, at most 63", cfg.Slot)
	}
	if err := checkStreaming(cfg.Streaming); err != nil {
		return nil, err
	}
	if err := CheckJSONType(cfg.NativeJSON, caps, "older than 25.3"); err != nil {
		return nil, err
	}
	textCols, err := textColumnSet(cfg.TextColumns)
	if err != nil {
		return nil, err
	}
	filters, err := filterSet(cfg.ExcludeColumns, cfg.RowFilters)
	if err != nil {
		return nil, err
	}
	return &Replicator{cfg: cfg, sink: sink, store: store, caps: caps, textCols: textCols, filters: filters,
		log: cfg.Logger.With(zap.String("component", "replicator")), retryable: retryable}, nil
}

// Run copies the tables on a first start, then streams changes until ctx is
// done (returning nil after a final flush) or, with Config.CatchUp, until
// every transaction committed before Run started is stored. Meanwhile it
// watches the slot (an invalidated slot stops Run with an error wrapping
// ErrSlotLost) and writes heartbeats when Config.Heartbeat is set.
func (r *Replicator) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	aux, stopAux := context.WithCancel(gctx)
	defer stopAux()
	g.Go(func() error {
		defer stopAux()
		return r.runRetrying(gctx)
	})
	g.Go(func() error { return r.watchSlot(aux) })
	if r.cfg.Heartbeat > 0 {
		g.Go(func() error { return r.heartbeat(aux, r.cfg.Heartbeat) })
	}
	return g.Wait()
}

// run is Run's replication proper.
func (r *Replicator) run(ctx context.Context) error {
	conn, err := connect(ctx, r.cfg.ConnString)
	if err != nil {
		return err
	}
	r.connected = true
	defer conn.Close(context.Background())
	var target pglogrepl.LSN
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(lsnScanner{&target}); err != nil {
		return fmt.Errorf("read current WAL position: %w", err)
	}
	if err := preflight(ctx, conn); err != nil {
		return err
	}
	capture, err := hasDDLCapture(ctx, conn)
	if err != nil {
		r.log.Warn("could not tell whether ferry's DDL capture is installed", zap.Error(err))
	} else if !capture {
		r.log.Info("ferry's DDL capture is not installed (run ferry setup as a superuser): schema changes are seen only when a row of the table changes, and a renamed column looks like a dropped one and an added one")
	}
	note, err := checkServerVersion(serverMajor(conn.PgConn()), capture)
	if err != nil {
		return err
	}
	if note != "" {
		r.log.Warn(note)
	}
	if err := r.capStandbyInterval(ctx, conn); err != nil {
		return err
	}
	stored, err := r.resumeStates(ctx, conn)
	if err != nil {
		return err
	}
	rels, err := r.resolve(ctx, conn, stored)
	if err != nil {
		return err
	}
	r.reportTables(rels)
	empty, err := r.prepare(ctx, rels, stored)
	if err != nil {
		return err
	}
	start, copied, later, err := r.startPosition(ctx, conn, rels)
	if err != nil {
		return err
	}
	if !copied {
		later = union(union(empty, later), r.unstored(rels, stored, empty))
	}
	if err := r.copyMissing(ctx, conn, later); err != nil {
		return err
	}
	for _, rel := range rels {
		if _, ok := stored[rel.ref.OID]; !ok || copied {
			if err := r.saveState(ctx, rel); err != nil {
				return err
			}
		}
	}
	err = r.stream(ctx, rels, start, target)
	if errors.Is(err, errDecoderFailed) {
		return r.recopyAfterDecoderFailure(ctx, conn, err)
	}
	return err
}

// maxRecopies bounds the copies one process makes again after decoder
// failures, each of every table.
const maxRecopies = 3

// recopyAfterDecoderFailure: PostgreSQL's decoder failed inside the
// server (decoderError), and fails the same way at every start. When the
// slot is still where the initial copy left it, nothing that ferry has
// confirmed rests on the stream yet, and the way out loses nothing: the
// initial copy is marked unfinished, so that the next cycle drops the
// slot and copies every table again under a new one. ferry torture met
// "could not map filenode ... to relation OID" so, at the first decode
// from a slot made while sessions ran DDL (PostgreSQL 15.18, three times);
// the slot made again decoded. Otherwise err ends the run.
func (r *Replicator) recopyAfterDecoderFailure(ctx context.Context, conn *pgx.Conn, err error) error {
	if r.recopies >= maxRecopies {
		return fmt.Errorf("%w (ferry copied every table again %d times after such failures, and stops)", err, r.recopies)
	}
	state, serr := r.store.SnapshotState(ctx, r.cfg.Slot)
	if serr != nil || !state.Done {
		return err
	}
	copied, perr := pglogrepl.ParseLSN(state.LSN)
	slot, serr := readSlot(ctx, conn, r.cfg.Slot)
	if perr != nil || serr != nil || !slot.exists || slot.confirmed != copied {
		return err
	}
	r.recopies++
	r.log.Warn("PostgreSQL's decoder failed before ferry confirmed anything past the initial copy: copying every table again from a new slot",
		zap.String("slot", r.cfg.Slot), zap.Stringer("copy_lsn", copied), zap.Int("time", r.recopies), zap.Error(err))
	if serr := r.store.SetSnapshotState(ctx, r.cfg.Slot, loader.SnapshotState{LSN: state.LSN}); serr != nil {
		return fmt.Errorf("%w; and marking the initial copy to be made again failed: %w", err, serr)
	}
	return fmt.Errorf("%w: %w", errCopyAgain, err)
}

// capStandbyInterval keeps status updates well inside wal_sender_timeout,
// after which PostgreSQL ends a connection it has not heard from, and sets
// how long ferry waits for a silent server (Config.ServerSilence).
func (r *Replicator) capStandbyInterval(ctx context.Context, conn *pgx.Conn) error {
	var ms int64
	err := conn.QueryRow(ctx, `SELECT setting::bigint * CASE unit WHEN 's' THEN 1000 ELSE 1 END FROM pg_settings WHERE name = 'wal_sender_timeout'`).Scan(&ms)
	if err != nil {
		return fmt.Errorf("read wal_sender_timeout: %w", err)
	}
	wst := time.Duration(ms) * time.Millisecond
	if limit := wst * 3 / 4; ms > 0 && r.cfg.StandbyInterval > limit {
		r.cfg.StandbyInterval = limit
	}
	if r.cfg.ServerSilence <= 0 {
		// The walsender sends a keepalive after half its timeout without
		// output, even while it decodes a transaction it does not send.
		r.cfg.ServerSilence = 10 * time.Minute
		if ms > 0 {
			r.cfg.ServerSilence = max(time.Minute, 2*wst)
		}
	}
	r.cfg.ServerSilence = max(r.cfg.ServerSilence, 3*r.cfg.StandbyInterval)
	return nil
}

// startPosition returns where to stream from, doing the initial copy first
// when no finished copy belongs to the slot (then copied is true), and the
// tables to copy before streaming: those the publications gained on a
// resume, or those the initial copy left out (see copyrecheck.go).
func (r *Replicator) startPosition(ctx context.Context, conn *pgx.Conn, rels []*relation) (start pglogrepl.LSN, copied bool, later []*relation, err error) {
	slot, err := readSlot(ctx, conn, r.cfg.Slot)
	if err != nil {
		return 0, false, nil, err
	}
	state, err := r.store.SnapshotState(ctx, r.cfg.Slot)
	if err != nil {
		return 0, false, nil, fmt.Errorf("read the initial copy's state: %w", err)
	}
	database := conn.Config().Database
	if slot.exists {
		if err := checkSlot(slot, r.cfg.Slot, database); err != nil {
			return 0, false, nil, err
		}
		if state.Done {
			added, err := r.ensurePublications(ctx, conn, rels, false)
			if err != nil {
				return 0, false, nil, err
			}
			r.log.Info("resuming", zap.String("slot", r.cfg.Slot), zap.Stringer("confirmed_lsn", slot.confirmed))
			return slot.confirmed, false, added, nil
		}
		r.log.Warn("the slot's initial copy did not finish: dropping the slot to copy again", zap.String("slot", r.cfg.Slot))
		if err := dropSlot(ctx, conn, r.cfg.Slot); err != nil {
			return 0, false, nil, err
		}
	} else if state.Done {
		r.log.Warn("the slot is gone but ClickHouse holds a finished copy: copying every table again", zap.String("slot", r.cfg.Slot))
	}
	if _, err := r.ensurePublications(ctx, conn, rels, true); err != nil {
		return 0, false, nil, err
	}
	start, later, err = r.initialCopy(ctx, conn, rels)
	return start, err == nil, later, err
}

// initialCopy creates the slot and copies every table under its snapshot,
// but those that changed before the copy could lock them: it returns
// those, marked as copies still to make (catalogTable.Copying), for the
// caller to copy under snapshots of their own before it streams. If the
// copy fails, the slot is dropped, so no orphan slot holds WAL.
func (r *Replicator) initialCopy(ctx context.Context, conn *pgx.Conn, rels []*relation) (pglogrepl.LSN, []*relation, error) {
	rconn, err := connectReplication(ctx, r.cfg.ConnString)
	if err != nil {
		return 0, nil, err
	}
	res, err := createSlot(ctx, rconn, r.cfg.Slot)
	if err != nil {
		rconn.Close(context.Background())
		return 0, nil, err
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err == nil {
		r.log.Info("created slot; copying tables", zap.String("slot", r.cfg.Slot), zap.Stringer("lsn", lsn), zap.Int("tables", len(rels)))
		err = r.store.SetSnapshotState(ctx, r.cfg.Slot, loader.SnapshotState{LSN: res.ConsistentPoint})
	}
	var deferred []*relation
	if err == nil {
		deferred, err = r.copyTables(ctx, res.SnapshotName, rels)
	}
	rconn.Close(context.Background())
	for _, rel := range deferred {
		// Marked before the copy counts as done: a crash from here on finds
		// the table's copy still to make, however far the stream got.
		rel.doc.Copying = true
		if err == nil {
			err = r.saveState(ctx, rel)
		}
	}
	// The copied tables' states go before the copy counts as done: a
	// resume takes a table without a state for one never copied.
	for _, rel := range rels {
		if err == nil && !slices.Contains(deferred, rel) {
			rel.doc.Copying = false
			err = r.saveState(ctx, rel)
		}
	}
	if err == nil {
		err = r.store.SetSnapshotState(ctx, r.cfg.Slot, loader.SnapshotState{LSN: res.ConsistentPoint, Done: true})
	}
	if err != nil {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if derr := dropSlot(dctx, conn, r.cfg.Slot); derr != nil {
			r.log.Error("could not drop the slot after a failed initial copy; drop it by hand", zap.String("slot", r.cfg.Slot), zap.Error(derr))
		} else if ctx.Err() != nil {
			r.log.Warn("stopped before the initial copy finished: the slot is dropped, and the next start copies again", zap.String("slot", r.cfg.Slot))
		}
		return 0, nil, err
	}
	return lsn, deferred, nil
}

// stream follows the slot from start.
func (r *Replicator) stream(ctx context.Context, rels []*relation, start, target pglogrepl.LSN) error {
	rconn, err := connectReplication(ctx, r.cfg.ConnString)
	if err != nil {
		return err
	}
	defer rconn.Close(context.Background())
	args, streaming, binary, err := r.pluginArgs(rconn, rels)
	if err != nil {
		return err
	}
	if err := pglogrepl.StartReplication(ctx, rconn, r.cfg.Slot, start, pglogrepl.StartReplicationOptions{PluginArgs: args}); err != nil {
		return fmt.Errorf("start replication from slot %s: %w", r.cfg.Slot, err)
	}
	if r.decoderFaults > 0 { // a test's (export_test.go): a real server fails so only by chance
		r.decoderFaults--
		return decoderError(r.cfg.Slot, start, &pgconn.PgError{Severity: "ERROR", Code: "XX000",
			Message: `could not map filenode "base/0/0" to relation OID (feigned by a test)`})
	}
	s := &stream{rep: r, conn: rconn, cfg: r.cfg, log: r.log, sink: r.sink, retryable: r.retryable,
		batch: loader.NewBatcher(r.sink, r.cfg.Batch.MaxRows, r.cfg.Batch.MaxBytes, r.cfg.Batch.MaxAge),
		byOID: map[uint32]*relation{}, skipped: map[uint32]bool{},
		lastEnd: start, acked: start, target: target, binary: binary}
	if streaming {
		s.spills = newSpills(r.cfg.SpillDir)
		defer s.spills.closeAll()
	}
	for _, rel := range rels {
		s.byOID[rel.ref.OID] = rel
	}
	s.reportTables()
	if err := s.startGuard(ctx, start); err != nil {
		return err
	}
	defer func() {
		if s.sql != nil {
			s.sql.Close(context.Background())
		}
	}()
	if err := s.checkMembership(ctx, true); err != nil {
		return err
	}
	if err := s.sendStatus(false); err != nil {
		return err
	}
	r.log.Info("streaming", zap.String("slot", r.cfg.Slot), zap.Stringer("from", start), zap.Bool("catch_up", r.cfg.CatchUp), zap.String("format", formatName(binary)))
	if r.cfg.CatchUp && start >= s.catchUpTo() {
		return nil
	}
	return s.loop(ctx)
}

// pubsList names the publications to stream, as pgoutput parses them (a
// list of identifiers): the main one, and the insert-only one when a table
// is replicated append-only.
func pubsList(main string, rels []*relation) string {
	var keyed, appendOnly bool
	for _, rel := range rels {
		keyed = keyed || !rel.ref.AppendOnly
		appendOnly = appendOnly || rel.ref.AppendOnly
	}
	var names []string
	if keyed {
		names = append(names, schema.QuotePG(main))
	}
	if appendOnly {
		names = append(names, schema.QuotePG(main+"_append"))
	}
	return strings.Join(names, ",")
}

// serverMajor is the server's major version, 0 when unknown.
func serverMajor(conn *pgconn.PgConn) int {
	v := conn.ParameterStatus("server_version")
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// lsnScanner scans a pg_lsn's text form.
type lsnScanner struct{ lsn *pglogrepl.LSN }

func (s lsnScanner) Scan(src any) error { return s.lsn.Scan(src) }

// catchUpTo is where a catch-up run ends: the WAL position when it began,
// or a later request of a stale copy's (see recheckStale).
func (s *stream) catchUpTo() pglogrepl.LSN {
	return max(s.target, s.rep.recheckTo)
}
