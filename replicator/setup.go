package replicator

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/schema"
)

// publication is one of ferry's two publications.
type publication struct {
	name       string
	appendOnly bool   // it publishes the --append-only tables
	with       string // what CREATE PUBLICATION says after the table list
	flag       string // the setting that names its tables
}

// publications are ferry's publications: main for the replicated tables,
// and main_append, which publishes inserts only, for the append-only ones.
func publications(main string) []publication {
	return []publication{
		{main, false, " WITH (publish_via_partition_root = true)", "--tables"},
		{main + "_append", true, " WITH (publish = 'insert', publish_via_partition_root = true)", "--append-only"},
	}
}

// ensurePublications creates ferry's publications when missing. On a first
// start (no usable slot yet) it also sets their table lists; afterwards it
// adds the replicated tables that are missing and returns them, since
// their rows need a copy of their own. Partitioned tables are published
// through their root, so each is one ClickHouse table.
func (r *Replicator) ensurePublications(ctx context.Context, conn *pgx.Conn, rels []*relation, firstStart bool) ([]*relation, error) {
	var added []*relation
	for _, p := range publications(r.cfg.Publication) {
		list := quotedList(rels, p.appendOnly)
		exists, all, err := publicationExists(ctx, conn, p.name)
		if err != nil {
			return nil, err
		}
		if !exists && list != "" {
			err = execPub(ctx, conn, p.name, "CREATE PUBLICATION "+schema.QuotePG(p.name)+" FOR TABLE "+list+p.with)
			if !createdMeanwhile(err) {
				if err != nil {
					return nil, err
				}
				continue
			}
			// Another session (a ferry killed a moment ago, whose backend
			// had not yet ended) created it between the look-up and the
			// CREATE: take it as found.
			if exists, all, err = publicationExists(ctx, conn, p.name); err != nil {
				return nil, err
			}
		}
		switch {
		case !exists:
			continue
		case all:
			continue
		case firstStart && list != "":
			err = setPublication(ctx, conn, p.name, rels, p.appendOnly, list)
		default:
			var more []*relation
			more, err = r.publishMissing(ctx, conn, p.name, rels, p.appendOnly)
			added = append(added, more...)
		}
		if err != nil {
			return nil, err
		}
	}
	return added, nil
}

// setPublication makes the publication list exactly the tables to
// replicate, published through their partition roots, and changes nothing
// that is so already: then a role that owns the publication but not the
// tables (the least-privilege setup, where an owner created it) can use it.
func setPublication(ctx context.Context, conn *pgx.Conn, name string, rels []*relation, appendOnly bool, list string) error {
	published, _, err := publicationTables(ctx, conn, name)
	if err != nil {
		return err
	}
	want := map[uint32]bool{}
	for _, rel := range rels {
		if rel.ref.AppendOnly == appendOnly {
			want[rel.ref.OID] = true
		}
	}
	same := len(published) == len(want)
	for _, p := range published {
		same = same && want[p.OID]
	}
	// A filter is set anew whenever one is wanted or one is there: the
	// catalog's normalized form of a condition does not compare with ours.
	if same {
		filtered, err := publicationFiltered(ctx, conn, name)
		if err != nil {
			return err
		}
		same = !filtered && !anyFiltered(rels, appendOnly)
	}
	if !same {
		if err := execPub(ctx, conn, name, "ALTER PUBLICATION "+schema.QuotePG(name)+" SET TABLE "+list); err != nil {
			return publicationDiff(err, published, rels, appendOnly)
		}
	}
	var viaRoot bool
	if err := conn.QueryRow(ctx, `SELECT pubviaroot FROM pg_publication WHERE pubname = $1`, name).Scan(&viaRoot); err != nil {
		return fmt.Errorf("look up publication %s: %w", name, err)
	}
	if viaRoot {
		return nil
	}
	return execPub(ctx, conn, name, "ALTER PUBLICATION "+schema.QuotePG(name)+" SET (publish_via_partition_root = true)")
}

// publicationDiff says which tables the publication lacks and which it
// has that are not to be replicated, when ferry could not change it.
func publicationDiff(err error, published []tableRef, rels []*relation, appendOnly bool) error {
	if pgCode(err) != "42501" {
		return err
	}
	in := map[uint32]bool{}
	for _, p := range published {
		in[p.OID] = true
	}
	wanted := map[uint32]bool{}
	var missing, extra []string
	for _, rel := range rels {
		if rel.ref.AppendOnly == appendOnly {
			wanted[rel.ref.OID] = true
			if !in[rel.ref.OID] {
				missing = append(missing, rel.ref.String())
			}
		}
	}
	for _, p := range published {
		if !wanted[p.OID] {
			extra = append(extra, p.String())
		}
	}
	var diff []string
	if len(missing) > 0 {
		diff = append(diff, "lacks "+strings.Join(missing, ", ")+", which ferry is to replicate")
	}
	if len(extra) > 0 {
		diff = append(diff, "lists "+strings.Join(extra, ", ")+", which ferry is not to replicate")
	}
	return fmt.Errorf("the publication %s, and only the owner of the tables may change that: %w", strings.Join(diff, " and "), err)
}

func publicationExists(ctx context.Context, conn *pgx.Conn, name string) (exists, allTables bool, err error) {
	err = conn.QueryRow(ctx, `SELECT true, puballtables FROM pg_publication WHERE pubname = $1`, name).Scan(&exists, &allTables)
	if err == pgx.ErrNoRows {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("look up publication %s: %w", name, err)
	}
	return exists, allTables, nil
}

// createdMeanwhile reports whether CREATE PUBLICATION failed because the
// publication exists (duplicate_object, or the unique index of the names
// when the other creator committed while this one waited on it).
func createdMeanwhile(err error) bool {
	c := pgCode(err)
	return c == "42710" || c == "23505"
}

func execPub(ctx context.Context, conn *pgx.Conn, name, sql string) error {
	if _, err := conn.Exec(ctx, sql); err != nil {
		if pgCode(err) == "42501" {
			return fmt.Errorf("publication %s: %w: the role must own the tables (or be superuser); or have an owner run: %s", name, err, sql)
		}
		return fmt.Errorf("publication %s: %w", name, err)
	}
	return nil
}

// publishMissing adds to the publication the replicated tables it lacks.
func (r *Replicator) publishMissing(ctx context.Context, conn *pgx.Conn, pub string, rels []*relation, appendOnly bool) ([]*relation, error) {
	published, _, err := publicationTables(ctx, conn, pub)
	if err != nil {
		return nil, err
	}
	in := map[uint32]bool{}
	for _, p := range published {
		in[p.OID] = true
	}
	var added []*relation
	for _, rel := range rels {
		if rel.ref.AppendOnly != appendOnly || in[rel.ref.OID] {
			continue
		}
		if err := execPub(ctx, conn, pub, "ALTER PUBLICATION "+schema.QuotePG(pub)+" ADD TABLE "+rel.publishedAs()); err != nil {
			return nil, err
		}
		r.log.Info("added a table to the publication; its rows will be copied", zap.String("publication", pub), zap.Stringer("table", rel.ref))
		rel.joining = true
		added = append(added, rel)
	}
	return added, nil
}

// slotState is a replication slot as pg_replication_slots shows it.
type slotState struct {
	exists    bool
	plugin    string
	database  string
	active    bool
	walStatus string
	confirmed pglogrepl.LSN
}

func readSlot(ctx context.Context, conn *pgx.Conn, slot string) (slotState, error) {
	var s slotState
	var confirmed *string
	var plugin, database, walStatus *string
	err := conn.QueryRow(ctx, `SELECT plugin, database, active, wal_status, confirmed_flush_lsn::text
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&plugin, &database, &s.active, &walStatus, &confirmed)
	if err == pgx.ErrNoRows {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("look up slot %s: %w", slot, err)
	}
	s.exists = true
	s.plugin, s.database, s.walStatus = deref(plugin), deref(database), deref(walStatus)
	if confirmed != nil {
		if s.confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return s, fmt.Errorf("slot %s: %w", slot, err)
		}
	}
	return s, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// checkSlot refuses a slot ferry cannot stream from.
func checkSlot(s slotState, slot, database string) error {
	switch {
	case s.plugin != "pgoutput":
		return fmt.Errorf("slot %s exists with plugin %q, ferry needs pgoutput: choose another --slot", slot, s.plugin)
	case s.database != database:
		return fmt.Errorf("slot %s belongs to database %q, not %q: choose another --slot", slot, s.database, database)
	case s.active:
		return fmt.Errorf("%w: slot %s is in use by another connection (another ferry, or the server has not yet noticed that ferry's last connection is gone): stop it, or choose another --slot", errSlotActive, slot)
	case s.walStatus == "lost":
		return slotLost(slot)
	}
	return nil
}

// createSlot creates the slot with an exported snapshot. The snapshot lives
// as long as conn runs no other command.
func createSlot(ctx context.Context, conn *pgconn.PgConn, slot string) (pglogrepl.CreateReplicationSlotResult, error) {
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{
		SnapshotAction: "EXPORT_SNAPSHOT",
		Mode:           pglogrepl.LogicalReplication,
	})
	if err != nil {
		if pgCode(err) == "53400" {
			return res, fmt.Errorf("create slot %s: %w: every replication slot is in use: raise max_replication_slots in postgresql.conf and restart, "+
				"or drop an unused slot (SELECT slot_name FROM pg_replication_slots WHERE NOT active)", slot, err)
		}
		return res, fmt.Errorf("create slot %s: %w", slot, err)
	}
	return res, nil
}

func dropSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
		return fmt.Errorf("drop slot %s: %w", slot, err)
	}
	return nil
}
