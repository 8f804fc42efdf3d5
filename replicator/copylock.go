package replicator

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Locks of a parallel copy. A COPY holds the table's ACCESS SHARE lock to
// the end of its transaction. When an ALTER or a rename of the table waits
// for that lock, PostgreSQL queues every later request for the table behind
// it: a second worker's COPY would wait for the ALTER, which waits for the
// first worker's transaction, which ends only once the second worker is
// done. So the coordinating connection locks every table first (waiting
// for DDL that runs, as a COPY would), and the other workers lock with
// NOWAIT: a range they cannot lock is left to the coordinating connection,
// whose lock lets it read past the queue. DDL on a table then waits for
// the copy to end, as it did for a copy on one connection.

// lockTable takes the table's ACCESS SHARE lock in conn's transaction,
// held to its end, and returns the table as it is named now, which no
// rename can change until then. names reads the name: conn itself, or,
// when conn's snapshot is older than the lock, a connection outside it.
func lockTable(ctx context.Context, conn, names *pgx.Conn, ref tableRef) (tableRef, error) {
	for range 5 {
		now, err := currentName(ctx, names, ref)
		if err != nil {
			return ref, err
		}
		if err := lockStatement(ctx, conn, "LOCK TABLE "+now.quoted()+" IN ACCESS SHARE MODE"); err != nil {
			if isUndefinedTable(err) {
				continue // renamed since: look again
			}
			return ref, fmt.Errorf("copy of %s: lock it: %w", ref, err)
		}
		// The name may have passed to another table between the two statements.
		if same, err := stillNamed(ctx, conn, now); err != nil || same {
			return now, err
		}
	}
	return ref, errKeptRenaming(ref)
}

// beginLocked begins on conn a read-only REPEATABLE READ transaction that
// holds the table's ACCESS SHARE lock. The lock comes first: LOCK TABLE
// takes no snapshot, so the transaction's snapshot, taken by its next
// query, sees every change of the table's shape that committed before the
// lock was granted, and none can commit after.
func beginLocked(ctx context.Context, conn *pgx.Conn, ref tableRef) (pgx.Tx, error) {
	for range 5 {
		now, err := currentName(ctx, conn, ref)
		if err != nil {
			return nil, err
		}
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return nil, fmt.Errorf("copy of %s: begin: %w", ref, err)
		}
		if _, err := tx.Exec(ctx, "LOCK TABLE "+now.quoted()+" IN ACCESS SHARE MODE"); err != nil {
			_ = tx.Rollback(ctx)
			if isUndefinedTable(err) {
				continue // renamed since: look again
			}
			return nil, fmt.Errorf("copy of %s: lock it: %w", ref, err)
		}
		same, err := stillNamed(ctx, tx, now)
		if err == nil && same {
			return tx, nil
		}
		_ = tx.Rollback(ctx) // or the name passed to another table meanwhile
		if err != nil {
			return nil, err
		}
	}
	return nil, errKeptRenaming(ref)
}

// currentName is the table of ref (its OID) as it is named now.
func currentName(ctx context.Context, conn *pgx.Conn, ref tableRef) (tableRef, error) {
	now := ref
	err := conn.QueryRow(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`,
		ref.OID).Scan(&now.Schema, &now.Name)
	if errors.Is(err, pgx.ErrNoRows) {
		return ref, fmt.Errorf("copy of %s: the table was dropped", ref)
	}
	if err != nil {
		return ref, fmt.Errorf("copy of %s: read its name: %w", ref, err)
	}
	return now, nil
}

// stillNamed reports whether now's name still belongs to now's table: a
// rename may have given it to another between reading and locking.
func stillNamed(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, now tableRef) (bool, error) {
	var oid uint32
	if err := q.QueryRow(ctx, `SELECT coalesce(to_regclass($1)::oid, 0)`, now.quoted()).Scan(&oid); err != nil {
		return false, fmt.Errorf("copy of %s: %w", now, err)
	}
	return oid == now.OID, nil
}

func errKeptRenaming(ref tableRef) error {
	return fmt.Errorf("copy of %s: the table kept being renamed while ferry tried to lock it; start ferry again", ref)
}

// tryLock takes the table's ACCESS SHARE lock without waiting; false when
// another session holds or waits for a lock that conflicts.
func tryLock(ctx context.Context, conn *pgx.Conn, ref tableRef) (bool, error) {
	err := lockStatement(ctx, conn, "LOCK TABLE "+ref.quoted()+" IN ACCESS SHARE MODE NOWAIT")
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("copy of %s: lock it: %w", ref, err)
	}
	return true, nil
}

// lockStatement runs a LOCK statement in a savepoint, so that its failure
// leaves the transaction, and the snapshot it reads, usable.
func lockStatement(ctx context.Context, conn *pgx.Conn, sql string) error {
	if _, err := conn.Exec(ctx, "SAVEPOINT ferry_lock"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, sql); err != nil {
		if _, rerr := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT ferry_lock"); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	_, err := conn.Exec(ctx, "RELEASE SAVEPOINT ferry_lock")
	return err
}

func isUndefinedTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}
