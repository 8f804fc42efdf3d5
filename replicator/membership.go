package replicator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
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
	if !force && time.Since(s.memberCheck) < membershipEvery {
		return nil
	}
	s.memberCheck = time.Now()
	if len(s.byOID) == 0 {
		return nil
	}
	conn, err := s.pg(ctx)
	if err != nil {
		return err
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
		if err := s.requestRejoinResync(ctx, conn, back); err != nil {
			return err
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
// the publication. The stream meets it after every change it was sent
// before the request, the ones after the table came back among them, and
// copies each table afresh there.
func (s *stream) requestRejoinResync(ctx context.Context, conn *pgx.Conn, rels []*relation) error {
	req := resyncRequest{At: time.Now().UTC(), Rejoined: true}
	for _, rel := range rels {
		req.Tables = append(req.Tables, resyncTable{OID: rel.ref.OID, Name: rel.ref.String()})
	}
	doc, err := json.Marshal(req)
	if err != nil {
		return err
	}
	var at pglogrepl.LSN
	if err := conn.QueryRow(ctx, `SELECT pg_logical_emit_message(true, $1, $2)::text`, resyncPrefix, string(doc)).Scan(lsnScanner{&at}); err != nil {
		return fmt.Errorf("write the request to copy tables added back to the publication into the WAL: %w", err)
	}
	s.rep.recheckTo = max(s.rep.recheckTo, at)
	return nil
}
