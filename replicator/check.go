package replicator

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/schema"
)

// Problem is one thing Check found wrong, with its fix.
type Problem struct {
	// Check names what was checked, e.g. "wal_level".
	Check string `json:"check"`
	// Detail says what is wrong.
	Detail string `json:"detail"`
	// Fix says what to do about it.
	Fix string `json:"fix"`
	// Blocking is set when ferry run would fail because of it; otherwise
	// it is a warning.
	Blocking bool `json:"blocking"`
}

// Check inspects the server, the role, the slot and the tables cfg names
// and returns every problem it finds, changing nothing. The error is for a
// failure to check at all (no connection).
func Check(ctx context.Context, cfg Config) ([]Problem, error) {
	cfg = cfg.withDefaults()
	conn, err := connect(ctx, cfg.ConnString)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	var ps []Problem
	for _, check := range []func(context.Context, *pgx.Conn, Config) ([]Problem, error){checkServer, checkCapacity, checkTables} {
		found, err := check(ctx, conn, cfg)
		if err != nil {
			return ps, err
		}
		ps = append(ps, found...)
	}
	return ps, nil
}

func checkServer(ctx context.Context, conn *pgx.Conn, cfg Config) ([]Problem, error) {
	var ps []Problem
	var walLevel, keep, user string
	var canReplicate, super bool
	err := conn.QueryRow(ctx, `SELECT current_setting('wal_level'), current_setting('max_slot_wal_keep_size'),
			current_user, rolreplication OR rolsuper, rolsuper FROM pg_roles WHERE rolname = current_user`).
		Scan(&walLevel, &keep, &user, &canReplicate, &super)
	if err != nil {
		return nil, fmt.Errorf("read server settings: %w", err)
	}
	if walLevel != "logical" {
		ps = append(ps, Problem{Check: "wal_level", Blocking: true, Detail: fmt.Sprintf("wal_level is %q, logical replication needs 'logical'", walLevel),
			Fix: "ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL"})
	}
	if !canReplicate {
		ps = append(ps, Problem{Check: "privileges", Blocking: true, Detail: fmt.Sprintf("role %s lacks the REPLICATION attribute", user),
			Fix: fmt.Sprintf("as a superuser: ALTER ROLE %s REPLICATION", schema.QuotePG(user))})
	}
	if keep == "-1" {
		ps = append(ps, Problem{Check: "max_slot_wal_keep_size", Detail: "max_slot_wal_keep_size is -1: a stopped ferry's slot keeps WAL until the disk fills",
			Fix: "ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf() (size it to the outage you want to survive)"})
	}
	slot, err := readSlot(ctx, conn, cfg.Slot)
	if err != nil {
		return nil, err
	}
	if slot.exists {
		if err := checkSlot(slot, cfg.Slot, conn.Config().Database); err != nil {
			fix := "see the detail; `ferry teardown` removes ferry's slot and publications"
			if slot.active {
				fix = "the slot is " + slotHolder(ctx, cfg) + ": stop that consumer, or give ferry a slot of its own with --slot"
			}
			ps = append(ps, Problem{Check: "slot", Blocking: true, Detail: err.Error(), Fix: fix})
		}
	}
	return ps, nil
}

// checkCapacity looks for a free replication slot and walsender.
func checkCapacity(ctx context.Context, conn *pgx.Conn, cfg Config) ([]Problem, error) {
	var ps []Problem
	var maxSlots, usedSlots, maxSenders, usedSenders int
	var ours bool
	err := conn.QueryRow(ctx, `SELECT current_setting('max_replication_slots')::int,
			(SELECT count(*) FROM pg_replication_slots)::int,
			EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1),
			current_setting('max_wal_senders')::int,
			(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender')::int`, cfg.Slot).
		Scan(&maxSlots, &usedSlots, &ours, &maxSenders, &usedSenders)
	if err != nil {
		return nil, fmt.Errorf("read replication capacity: %w", err)
	}
	if !ours && usedSlots >= maxSlots {
		ps = append(ps, Problem{Check: "replication slots", Blocking: true,
			Detail: fmt.Sprintf("all %d replication slots are in use", maxSlots),
			Fix:    "raise max_replication_slots and restart PostgreSQL, or drop an unused slot (SELECT slot_name FROM pg_replication_slots WHERE NOT active)"})
	}
	if usedSenders >= maxSenders {
		ps = append(ps, Problem{Check: "wal senders", Blocking: true,
			Detail: fmt.Sprintf("all %d WAL senders are in use", maxSenders),
			Fix:    "raise max_wal_senders and restart PostgreSQL, or stop an idle replication client"})
	}
	return ps, nil
}

// checkTables checks what ferry would replicate: each table exists, can be
// read, and has a key and a replica identity.
func checkTables(ctx context.Context, conn *pgx.Conn, cfg Config) ([]Problem, error) {
	r := &Replicator{cfg: cfg, log: cfg.Logger}
	refs, err := r.tableRefs(ctx, conn)
	if err != nil {
		return []Problem{{Check: "tables", Blocking: true, Detail: err.Error(), Fix: "name existing tables with --tables"}}, nil
	}
	var role string
	if err := conn.QueryRow(ctx, `SELECT current_user`).Scan(&role); err != nil {
		return nil, fmt.Errorf("read the role's name: %w", err)
	}
	var ps []Problem
	var noIdentity []string
	unowned := map[uint32]bool{}
	ok := 0
	for _, ref := range refs {
		var canSelect, owns, hasPK, hasKey bool
		var ident string
		err := conn.QueryRow(ctx, `SELECT has_table_privilege(c.oid, 'SELECT'),
				pg_has_role(c.relowner, 'USAGE'),
				EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary),
				EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL),
				c.relreplident::text
			FROM pg_class c WHERE c.oid = $1`, ref.OID).Scan(&canSelect, &owns, &hasPK, &hasKey, &ident)
		if err != nil {
			return nil, fmt.Errorf("inspect table %s: %w", ref, err)
		}
		if !canSelect {
			ps = append(ps, Problem{Check: "privileges", Blocking: true, Detail: "no SELECT privilege on " + ref.String(),
				Fix: fmt.Sprintf("GRANT SELECT ON %s TO %s", ref.quoted(), schema.QuotePG(role))})
			continue
		}
		if !owns {
			unowned[ref.OID] = true
		}
		identity := ident == "f" || (ident == "d" && hasPK) || ident == "i"
		switch {
		case ref.AppendOnly:
			ok++
		case !identity:
			noIdentity = append(noIdentity, ref.String())
		case ident == "f" && !hasKey:
			ps = append(ps, Problem{Check: "keys", Detail: ref.String() + " has REPLICA IDENTITY FULL but no primary key: rows equal in every column are kept once in ClickHouse",
				Fix: fmt.Sprintf("ALTER TABLE %s ADD PRIMARY KEY (...)", ref.quoted())})
			ok++
		default:
			ok++
		}
	}
	if len(noIdentity) > 0 {
		ps = append(ps, Problem{Check: "replica identity",
			Detail: "ferry leaves out these tables, which have no primary key or replica identity: " + strings.Join(noIdentity, ", "),
			Fix:    "add a primary key, or ALTER TABLE ... REPLICA IDENTITY FULL, or replicate them insert-only with --append-only"})
	}
	pub, err := checkPublication(ctx, conn, cfg, refs, unowned)
	if err != nil {
		return nil, err
	}
	ps = append(ps, pub...)
	if ok == 0 {
		ps = append(ps, Problem{Check: "tables", Blocking: true, Detail: "no table ferry could replicate",
			Fix: "name tables with --tables, or create tables with a primary key"})
	}
	return ps, nil
}

// slotHolder describes the connection that holds the slot, as far as the
// server tells: its pid, application_name, user and client address.
func slotHolder(ctx context.Context, cfg Config) string {
	conn, err := connect(ctx, cfg.ConnString)
	if err != nil {
		return "its holder is unknown (" + err.Error() + ")"
	}
	defer conn.Close(context.Background())
	var pid *int32
	var app, user, addr *string
	err = conn.QueryRow(ctx, `SELECT s.active_pid, a.application_name, a.usename::text, host(a.client_addr)
		FROM pg_replication_slots s LEFT JOIN pg_stat_activity a ON a.pid = s.active_pid
		WHERE s.slot_name = $1`, cfg.Slot).Scan(&pid, &app, &user, &addr)
	if err != nil || pid == nil {
		return "its holder is gone now"
	}
	where := deref(addr)
	if where == "" {
		where = "a local socket, or an address this role may not see"
	}
	return fmt.Sprintf("held by PostgreSQL backend pid %d (application_name %q, user %q, from %s; "+
		"SELECT pg_terminate_backend(%d) ends it)", *pid, deref(app), deref(user), where, *pid)
}

// checkPublication finds the tables ferry would have to add to one of its
// publications (or create it for) without owning them, which PostgreSQL
// refuses: the main one for the replicated tables, <publication>_append
// (inserts only) for the append-only ones.
func checkPublication(ctx context.Context, conn *pgx.Conn, cfg Config, refs []tableRef, unowned map[uint32]bool) ([]Problem, error) {
	if len(unowned) == 0 {
		return nil, nil
	}
	var ps []Problem
	for _, p := range publications(cfg.Publication) {
		found, err := checkOnePublication(ctx, conn, p, refs, func(ref tableRef) bool {
			return ref.AppendOnly == p.appendOnly && unowned[ref.OID]
		})
		if err != nil {
			return nil, err
		}
		ps = append(ps, found...)
	}
	return ps, nil
}

// checkOnePublication reports the tables of refs for which need holds
// that publication pub lacks.
func checkOnePublication(ctx context.Context, conn *pgx.Conn, pub publication, refs []tableRef, need func(tableRef) bool) ([]Problem, error) {
	exists, all, err := publicationExists(ctx, conn, pub.name)
	if err != nil || all {
		return nil, err
	}
	in := map[uint32]bool{}
	if exists {
		published, _, err := publicationTables(ctx, conn, pub.name)
		if err != nil {
			return nil, err
		}
		for _, p := range published {
			in[p.OID] = true
		}
	}
	var missing, quoted []string
	for _, ref := range refs {
		if need(ref) && !in[ref.OID] {
			missing = append(missing, ref.String())
			quoted = append(quoted, ref.quoted())
		}
	}
	name := schema.QuotePG(pub.name)
	switch {
	case len(missing) == 0:
		return nil, nil
	case !exists:
		return []Problem{{Check: "privileges", Blocking: true,
			Detail: "publication " + pub.name + " does not exist and the role does not own " + strings.Join(missing, ", "),
			Fix:    fmt.Sprintf("have the owner (or a superuser) run CREATE PUBLICATION %s FOR TABLE %s%s", name, strings.Join(quoted, ", "), pub.with)}}, nil
	}
	return []Problem{{Check: "publication", Blocking: true,
		Detail: fmt.Sprintf("publication %s lacks %s, which ferry is to replicate, and only the owner of a table can add it", pub.name, strings.Join(missing, ", ")),
		Fix:    fmt.Sprintf("have the owner (or a superuser) run ALTER PUBLICATION %s ADD TABLE %s, or leave the tables out of %s", name, strings.Join(quoted, ", "), pub.flag)}}, nil
}
