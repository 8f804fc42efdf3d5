package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
)

// A table dropped from the publication and added back has a gap: PostgreSQL
// sent none of the changes made while it was out, and nothing in the stream
// says that it left or came back. What does tell is the catalog: every
// ADD TABLE (and every SET TABLE that changes a table's filter or column
// list) makes a new pg_publication_rel row, with a new OID, and a schema
// added back a new pg_publication_namespace row. ferry keeps, with each
// table's state, the catalog rows that publish it (its membership); when
// none of them publishes it any more but others do, it was out in between,
// and ferry copies it afresh (a resync request written into the WAL, so
// that the stream meets it in order and the slot is not confirmed past it
// before the copy is swapped in).

// An update that leaves a TOASTed column as it was (loader.Unchanged) takes
// the column's value from the key's row that ClickHouse holds. A table added
// back may lack that row: it was inserted while the table was out. The
// copy that follows the table's return brings every row as it is then, so
// until the stream meets the request for that copy (relation.recopy) such
// updates are left to it, not written: every change before the request in
// the stream committed before the copy's snapshot. Only the catalog tells
// that the table came back, and it must be read after such an update was
// received. A sink that resolves the values itself (ClickHouse) fails the
// write when it finds none, and the flush then reads the catalog and tries
// again; for one that passes them on (the Kafka publisher, whose loader
// resolves them), a flush that holds such an update reads the catalog
// first, unless it was read since.

// membershipEvery is how often a running stream reads the memberships.
const membershipEvery = 5 * time.Second

// memberships reads, for each of oids, the catalog rows of ferry's
// publications that publish it now: "rel:<oid>" for a pg_publication_rel
// row of the table or of a partitioned table it belongs to,
// "schema:<oid>" for a pg_publication_namespace row (PostgreSQL 15 and
// later), "all:<oid>" for a FOR ALL TABLES publication. A table out of the
// publications is absent.
func (r *Replicator) memberships(ctx context.Context, conn *pgx.Conn, oids []uint32) (map[uint32][]string, error) {
	schemas := `SELECT NULL::oid, NULL::oid WHERE false`
	if serverMajor(conn.PgConn()) >= 15 {
		schemas = `SELECT pn.oid, pn.pnnspid FROM pg_publication_namespace pn WHERE pn.pnpubid IN (SELECT oid FROM pubs)`
	}
	// pg_partition_ancestors lists a partition and its ancestors, and
	// nothing for a table that is no partition.
	rows, err := conn.Query(ctx, `WITH pubs AS (SELECT oid, puballtables FROM pg_publication WHERE pubname IN ($1, $2)),
		nss(oid, nsp) AS (`+schemas+`)
		SELECT c.oid, m.member FROM pg_class c,
			LATERAL (SELECT c.oid UNION SELECT relid FROM pg_partition_ancestors(c.oid)) up(relid),
			LATERAL (SELECT 'rel:' || pr.oid FROM pg_publication_rel pr WHERE pr.prpubid IN (SELECT oid FROM pubs) AND pr.prrelid = up.relid
				UNION ALL SELECT 'schema:' || nss.oid FROM nss JOIN pg_class a ON a.relnamespace = nss.nsp WHERE a.oid = up.relid
				UNION ALL SELECT 'all:' || pubs.oid FROM pubs WHERE pubs.puballtables) m(member)
		WHERE c.oid = ANY($3) GROUP BY 1, 2 ORDER BY 1, 2`, r.cfg.Publication, r.cfg.Publication+"_append", oids)
	if err != nil {
		return nil, fmt.Errorf("read which publication rows publish the replicated tables: %w", err)
	}
	out := map[uint32][]string{}
	var oid uint32
	var member string
	_, err = pgx.ForEachRow(rows, []any{&oid, &member}, func() error {
		out[oid] = append(out[oid], member)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read which publication rows publish the replicated tables: %w", err)
	}
	return out, nil
}

// joinPublished joins the tables of the publications that ferry does not
// replicate yet: added to a publication while ferry runs, out of it when
// ferry started, or out of it when a change of theirs came (see join). Their first change would make them join too (see join),
// but a table nobody changes would stay without its rows in ClickHouse, or
// with the rows it had when it left the publication.
func (s *stream) joinPublished(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `SELECT DISTINCT c.oid FROM pg_publication_tables p
		JOIN pg_namespace n ON n.nspname = p.schemaname JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
		WHERE p.pubname IN ($1, $2) ORDER BY 1`, s.cfg.Publication, s.cfg.Publication+"_append")
	if err != nil {
		return fmt.Errorf("list the tables of publication %s: %w", s.cfg.Publication, err)
	}
	oids, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		return fmt.Errorf("list the tables of publication %s: %w", s.cfg.Publication, err)
	}
	for _, oid := range oids {
		if s.byOID[oid] != nil {
			continue
		}
		if s.skipped[oid] {
			// Left out when its change came: it was not published then
			// (dropped from the publication after that change), and its
			// changes since were left out too. Its copy holds them.
			s.log.Warn("a table ferry left out as unpublished is in the publication now: copying it", zap.Uint32("oid", oid))
			delete(s.skipped, oid)
		}
		if err := s.join(ctx, oid); err != nil {
			return err
		}
	}
	return nil
}

// memberDue is when checkMembership next reads the catalog unforced.
func (s *stream) memberDue() time.Time {
	every := membershipEvery
	if s.rep.memberEvery > 0 {
		every = s.rep.memberEvery
	}
	return s.memberCheck.Add(every)
}

// rejoined tells whether a table published by the rows was out of the
// publications since it was published by known: none of them is left.
func rejoined(known, now []string) bool {
	if len(known) == 0 || len(now) == 0 {
		return false
	}
	for _, m := range now {
		if slices.Contains(known, m) {
			return false
		}
	}
	return true
}

// checkMembership reads the memberships of the replicated tables (at most
// every membershipEvery unless force) and asks for a resync of each table
// that left the publication and came back since ferry last looked. A table
// out of the publication now keeps what ferry knew: ferry follows it again
// when it comes back.
func (s *stream) checkMembership(ctx context.Context, force bool) error {
	if s.checking || (!force && time.Now().Before(s.memberDue())) {
		return nil
	}
	s.checking = true
	defer func() { s.checking = false }()
	s.memberCheck = time.Now()
	conn, err := s.pg(ctx)
	if err != nil {
		return err
	}
	if !s.inTx {
		if err := s.joinPublished(ctx, conn); err != nil {
			return err
		}
	}
	if len(s.byOID) == 0 {
		return nil
	}
	oids := make([]uint32, 0, len(s.byOID))
	for oid := range s.byOID {
		oids = append(oids, oid)
	}
	slices.Sort(oids)
	now, err := s.rep.memberships(ctx, conn, oids)
	if err != nil {
		return err
	}
	var back []*relation
	var changed []*relation
	for _, oid := range oids {
		rel, cur := s.byOID[oid], now[oid]
		if len(cur) == 0 || slices.Equal(cur, rel.member) {
			continue
		}
		if rejoined(rel.member, cur) {
			s.log.Warn("the table was dropped from the publication and added back: PostgreSQL sent none of its changes made while it was out, "+
				"so ferry copies it afresh", zap.Stringer("table", rel.ref), zap.String("clickhouse_table", rel.tm.Name),
				zap.Strings("published_by_before", rel.member), zap.Strings("published_by_now", cur))
			back = append(back, rel)
		}
		rel.member = cur
		changed = append(changed, rel)
	}
	if len(back) > 0 && serverMajor(s.conn) < 14 {
		return fmt.Errorf("table %s was dropped from publication %s and added back, so ClickHouse lacks the changes made while it was out; "+
			"on PostgreSQL %d ferry cannot copy it again in stream order (pgoutput sends no messages before 14): "+
			"stop ferry, drop the ClickHouse table %s and start ferry again to copy it", back[0].ref, s.cfg.Publication, serverMajor(s.conn), back[0].tm.Name)
	}
	if len(back) > 0 {
		req, err := s.requestRejoinResync(ctx, conn, back)
		if err != nil {
			return err
		}
		for _, rel := range back {
			if err := s.abandonResync(ctx, rel.ref.OID, "the table was dropped from the publication and added back: the copy ferry makes of it for that replaces this one"); err != nil {
				return err
			}
			rel.recopy = req
			n := s.batch.Drop(rel.tm, func(r *loader.Row) bool { return !r.Deleted && loader.HasUnchanged(r.Values) })
			rel.leftToCopy += n
			s.leftToCopy += n
			if n > 0 {
				s.log.Warn("updates of the table that left TOASTed columns unchanged are left to its copy: ClickHouse may lack the rows they update",
					zap.Stringer("table", rel.ref), zap.Int("updates", n))
			}
		}
	}
	if len(changed) == 0 {
		return nil
	}
	// Stored with everything before it, like every state ferry saves while
	// it streams.
	if err := s.flush(ctx); err != nil {
		return err
	}
	for _, rel := range changed {
		if err := s.rep.saveState(ctx, rel); err != nil {
			return err
		}
	}
	return nil
}

// requestRejoinResync writes a resync request for tables that came back to
// the publication, and returns what names it (see recopyName). The stream
// meets it after every change it was sent before the request, the ones
// after the table came back among them, and copies each table afresh there.
func (s *stream) requestRejoinResync(ctx context.Context, conn *pgx.Conn, rels []*relation) (string, error) {
	req := resyncRequest{At: time.Now().UTC(), Rejoined: true}
	for _, rel := range rels {
		req.Tables = append(req.Tables, resyncTable{OID: rel.ref.OID, Name: rel.ref.String()})
	}
	doc, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	var at pglogrepl.LSN
	if err := conn.QueryRow(ctx, `SELECT pg_logical_emit_message(true, $1, $2)::text`, resyncPrefix, string(doc)).Scan(lsnScanner{&at}); err != nil {
		return "", fmt.Errorf("write the request to copy tables added back to the publication into the WAL: %w", err)
	}
	s.rep.recheckTo = max(s.rep.recheckTo, at)
	return recopyName(req), nil
}

// recopyName names a request to copy tables added back: its time, which
// no other request of the slot's shares.
func recopyName(req resyncRequest) string {
	return req.At.UTC().Format(time.RFC3339Nano)
}

// recopied ends the wait of a table added back for its copy, once the copy
// of the request named name is swapped in. An earlier request's copy does
// not end it: the table came back again since.
func (s *stream) recopied(ctx context.Context, oid uint32, name string) error {
	rel := s.byOID[oid]
	if rel == nil || rel.recopy != name {
		return nil
	}
	if rel.leftToCopy > 0 {
		s.log.Info("the copy holds the updates left to it", zap.Stringer("table", rel.ref), zap.Int("updates", rel.leftToCopy))
	}
	rel.recopy, rel.leftToCopy = "", 0
	return s.rep.saveState(ctx, rel)
}

// checkBeforeFlush reads the catalog before a flush that holds updates with
// Unchanged values, when the sink passes them on and the catalog was not
// read since the newest of them came (see above).
func (s *stream) checkBeforeFlush(ctx context.Context) error {
	if s.unchangedAt.IsZero() || s.memberCheck.After(s.unchangedAt) {
		return nil
	}
	if _, ok := s.sink.(loader.UnchangedResolver); ok {
		return nil
	}
	return s.checkMembership(ctx, true)
}

// retryLeftToCopy handles a flush's error: when the sink found no value
// for an unchanged column, it reads the catalog, and when that leaves
// updates of a table added back to the copy, flushes again. Otherwise it
// returns err.
func (s *stream) retryLeftToCopy(ctx context.Context, err error) error {
	if !errors.Is(err, loader.ErrNoUnchangedValue) {
		return err
	}
	before := s.leftToCopy
	if cerr := s.checkMembership(ctx, true); cerr != nil {
		return errors.Join(err, cerr)
	}
	if s.leftToCopy == before {
		return err
	}
	return s.flushWithRetry(ctx)
}
