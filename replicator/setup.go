package replicator

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ferry-cdc/ferry/schema"
)

// ensurePublications creates ferry's publications when missing. On a first
// start (no usable slot yet) it also sets their table lists; afterwards it
// only checks that every replicated table is published, since a table
// added later would need its own initial copy.
func (r *Replicator) ensurePublications(ctx context.Context, conn *pgx.Conn, rels []*relation, firstStart bool) error {
	for _, p := range []struct {
		name       string
		appendOnly bool
		with       string
	}{
		{r.cfg.Publication, false, ""},
		{r.cfg.Publication + "_append", true, " WITH (publish = 'insert')"},
	} {
		list := quotedList(rels, p.appendOnly)
		exists, all, err := publicationExists(ctx, conn, p.name)
		if err != nil {
			return err
		}
		switch {
		case !exists && list == "":
			continue
		case !exists:
			err = execPub(ctx, conn, p.name, "CREATE PUBLICATION "+schema.QuotePG(p.name)+" FOR TABLE "+list+p.with)
		case all:
			continue
		case firstStart && list != "":
			err = execPub(ctx, conn, p.name, "ALTER PUBLICATION "+schema.QuotePG(p.name)+" SET TABLE "+list)
		default:
			err = r.checkPublished(ctx, conn, p.name, rels, p.appendOnly)
		}
		if err != nil {
			return err
		}
	}
	return nil
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

func execPub(ctx context.Context, conn *pgx.Conn, name, sql string) error {
	if _, err := conn.Exec(ctx, sql); err != nil {
		if pgCode(err) == "42501" {
			return fmt.Errorf("publication %s: %w: the role must own the tables (or be superuser); or have an owner run: %s", name, err, sql)
		}
		return fmt.Errorf("publication %s: %w", name, err)
	}
	return nil
}

func (r *Replicator) checkPublished(ctx context.Context, conn *pgx.Conn, pub string, rels []*relation, appendOnly bool) error {
	published, _, err := publicationTables(ctx, conn, pub)
	if err != nil {
		return err
	}
	in := map[uint32]bool{}
	for _, p := range published {
		in[p.OID] = true
	}
	for _, rel := range rels {
		if rel.ref.AppendOnly == appendOnly && !in[rel.ref.OID] {
			return fmt.Errorf("table %s is not in publication %s, and ferry cannot yet add a table to a running replication: "+
				"replicate it under another --slot and --publication, or drop slot %s to copy every table anew", rel.ref, pub, r.cfg.Slot)
		}
	}
	return nil
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
		return fmt.Errorf("slot %s is in use by another connection (another ferry?): stop it, or choose another --slot", slot)
	case s.walStatus == "lost":
		return fmt.Errorf("slot %s was invalidated: PostgreSQL removed WAL it still needed (max_slot_wal_keep_size). "+
			"Resync: SELECT pg_drop_replication_slot('%s'); then start ferry again, which copies every table anew", slot, slot)
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
