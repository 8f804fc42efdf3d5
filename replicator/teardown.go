package replicator

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/schema"
)

// TeardownOptions say how far Teardown may go.
type TeardownOptions struct {
	// DryRun lists the steps without running any.
	DryRun bool
	// Force terminates a walsender still streaming from the slot (a ferry
	// running elsewhere). Without it Teardown refuses an active slot.
	Force bool
}

// Teardown removes what ferry created in PostgreSQL: the slot, both
// publications, and the DDL capture trigger and function. It returns the
// steps it took (or, with DryRun, would take); objects already gone are
// skipped, so running it twice is harmless.
func Teardown(ctx context.Context, cfg Config, opt TeardownOptions) ([]string, error) {
	cfg = cfg.withDefaults()
	conn, err := connect(ctx, cfg.ConnString)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	steps, err := teardownSteps(ctx, conn, cfg)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, st := range steps {
		if opt.DryRun {
			done = append(done, st.what)
			continue
		}
		if st.activePID != 0 {
			if !opt.Force {
				return done, fmt.Errorf("slot %s is in use by PostgreSQL backend %d (a running ferry?): stop it first, or pass --force to terminate that connection", cfg.Slot, st.activePID)
			}
			if err := terminate(ctx, conn, cfg.Slot, st.activePID); err != nil {
				return done, err
			}
			done = append(done, fmt.Sprintf("terminated backend %d streaming from slot %s", st.activePID, cfg.Slot))
		}
		if _, err := conn.Exec(ctx, st.sql, st.args...); err != nil {
			if pgCode(err) == "42501" {
				return done, fmt.Errorf("%s: %w: ferry setup installed it as a superuser, so run ferry teardown as one to remove it", st.what, err)
			}
			return done, fmt.Errorf("%s: %w", st.what, err)
		}
		done = append(done, st.what)
	}
	return done, nil
}

type teardownStep struct {
	what      string
	sql       string
	args      []any
	activePID int
}

// ddlFunctions are the functions ferry setup installs.
var ddlFunctions = []string{"public." + DDLFunction + "()", "public." + DDLFunction + "_publish(oid, text)"}

func teardownSteps(ctx context.Context, conn *pgx.Conn, cfg Config) ([]teardownStep, error) {
	var steps []teardownStep
	var pid *int32
	err := conn.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, cfg.Slot).Scan(&pid)
	switch {
	case err == pgx.ErrNoRows:
	case err != nil:
		return nil, fmt.Errorf("look up slot %s: %w", cfg.Slot, err)
	default:
		st := teardownStep{what: "drop replication slot " + cfg.Slot, sql: `SELECT pg_drop_replication_slot($1)`, args: []any{cfg.Slot}}
		if pid != nil {
			st.activePID = int(*pid)
		}
		steps = append(steps, st)
	}
	for _, pub := range []string{cfg.Publication, cfg.Publication + "_append"} {
		exists, _, err := publicationExists(ctx, conn, pub)
		if err != nil {
			return nil, err
		}
		if exists {
			steps = append(steps, teardownStep{what: "drop publication " + pub, sql: "DROP PUBLICATION IF EXISTS " + schema.QuotePG(pub)})
		}
	}
	for _, trig := range []string{DDLTrigger, DDLDropTrigger} {
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = $1)`, trig).Scan(&exists); err != nil {
			return nil, fmt.Errorf("look up event trigger %s: %w", trig, err)
		}
		if exists {
			steps = append(steps, teardownStep{what: "drop event trigger " + trig, sql: "DROP EVENT TRIGGER IF EXISTS " + trig})
		}
	}
	for _, fn := range ddlFunctions {
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT to_regprocedure($1) IS NOT NULL`, fn).Scan(&exists); err != nil {
			return nil, fmt.Errorf("look up function %s: %w", fn, err)
		}
		if exists {
			steps = append(steps, teardownStep{what: "drop function " + fn, sql: "DROP FUNCTION IF EXISTS " + fn})
		}
	}
	return steps, nil
}

// terminate ends the walsender holding the slot and waits until the slot
// is free, since dropping an active slot fails.
func terminate(ctx context.Context, conn *pgx.Conn, slot string, pid int) error {
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		return fmt.Errorf("terminate backend %d streaming from slot %s: %w", pid, slot, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var active bool
		err := conn.QueryRow(ctx, `SELECT coalesce((SELECT active FROM pg_replication_slots WHERE slot_name = $1), false)`, slot).Scan(&active)
		if err != nil {
			return fmt.Errorf("look up slot %s: %w", slot, err)
		}
		if !active {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slot %s is still in use 10s after terminating backend %d", slot, pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
