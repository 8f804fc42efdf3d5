package replicator

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SlotStatus is what PostgreSQL says about ferry's slot and publications,
// read without touching the stream: it works while ferry runs elsewhere.
type SlotStatus struct {
	Slot      string `json:"slot"`
	Exists    bool   `json:"exists"`
	Active    bool   `json:"active"`
	ActivePID int    `json:"active_pid,omitempty"`
	// WALStatus is pg_replication_slots.wal_status; "lost" means the slot
	// was invalidated.
	WALStatus string `json:"wal_status,omitempty"`
	// ConfirmedLSN is the position ferry last confirmed.
	ConfirmedLSN string `json:"confirmed_lsn,omitempty"`
	// CurrentLSN is the server's WAL end when the status was read.
	CurrentLSN string `json:"current_lsn"`
	// LagBytes is CurrentLSN - ConfirmedLSN.
	LagBytes int64 `json:"lag_bytes"`
	// RetainedBytes is the WAL the slot holds on the server's disk.
	RetainedBytes int64 `json:"retained_wal_bytes"`
	// Unlimited is set when max_slot_wal_keep_size is -1.
	Unlimited bool `json:"wal_keep_size_unlimited"`
	// Tables are the publications' tables.
	Tables []PublishedTable `json:"tables"`
}

// PublishedTable is a table of one of ferry's publications.
type PublishedTable struct {
	Name        string `json:"table"`
	Publication string `json:"publication"`
	// Estimate is PostgreSQL's row estimate (pg_class.reltuples); -1 when
	// the table was never analyzed.
	Estimate int64 `json:"pg_rows_estimate"`
}

// Status reads the slot and the publications named by cfg.
func Status(ctx context.Context, cfg Config) (SlotStatus, error) {
	cfg = cfg.withDefaults()
	conn, err := connect(ctx, cfg.ConnString)
	if err != nil {
		return SlotStatus{}, err
	}
	defer conn.Close(context.Background())
	st := SlotStatus{Slot: cfg.Slot}
	var pid *int32
	var status, confirmed *string
	var lag, retained *int64
	err = conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text, current_setting('max_slot_wal_keep_size') = '-1'`).Scan(&st.CurrentLSN, &st.Unlimited)
	if err != nil {
		return st, fmt.Errorf("read the server's WAL position: %w", err)
	}
	err = conn.QueryRow(ctx, `SELECT active, active_pid, wal_status, confirmed_flush_lsn::text,
			pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint,
			pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, cfg.Slot).Scan(&st.Active, &pid, &status, &confirmed, &lag, &retained)
	switch {
	case err == pgx.ErrNoRows:
	case err != nil:
		return st, fmt.Errorf("read slot %s: %w", cfg.Slot, err)
	default:
		st.Exists = true
		st.WALStatus, st.ConfirmedLSN = deref(status), deref(confirmed)
		if pid != nil {
			st.ActivePID = int(*pid)
		}
		if lag != nil {
			st.LagBytes = max(*lag, 0)
		}
		if retained != nil {
			st.RetainedBytes = max(*retained, 0)
		}
	}
	rows, err := conn.Query(ctx, `SELECT p.pubname, p.schemaname || '.' || p.tablename,
			coalesce((SELECT c.reltuples::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = p.schemaname AND c.relname = p.tablename), -1)
		FROM pg_publication_tables p WHERE p.pubname = ANY($1) ORDER BY 2, 1`,
		[]string{cfg.Publication, cfg.Publication + "_append"})
	if err != nil {
		return st, fmt.Errorf("list the publications' tables: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t PublishedTable
		if err := rows.Scan(&t.Publication, &t.Name, &t.Estimate); err != nil {
			return st, fmt.Errorf("list the publications' tables: %w", err)
		}
		st.Tables = append(st.Tables, t)
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("list the publications' tables: %w", err)
	}
	return st, nil
}
