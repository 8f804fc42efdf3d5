package replicator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
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

// Writers from before a table joined the publication. pgoutput decides
// whether a change is published by the catalog as of the change, not of
// its transaction's commit: a row that a transaction wrote to a table
// before the table joined the publication is never sent, even when the
// transaction commits after (measured on PostgreSQL 15.18). A copy whose
// snapshot is taken while such a transaction runs does not hold that row
// either: it would be lost. So a copy that follows a table's joining
// first waits for every transaction holding a write lock on the table (or
// on one of its partitions) to end. A transaction that takes one later
// writes after the join, which the stream carries. The wait queues no
// lock: writers that come meanwhile are not held up.

// writersPoll is how often waitForWriters looks again.
const writersPoll = 100 * time.Millisecond

// waitForWriters returns once every transaction that holds a write lock on
// the table of ref, or on one of its partitions, has ended. A stream that
// waits for the copy answers the server meanwhile (copyKeepingAlive).
func waitForWriters(ctx context.Context, conn *pgx.Conn, ref tableRef, log *zap.Logger) error {
	const held = `FROM pg_locks WHERE locktype = 'relation' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND mode IN ('RowExclusiveLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
		AND relation IN (SELECT $1::oid UNION SELECT relid FROM pg_partition_tree($1::oid::regclass))
		AND pid IS DISTINCT FROM pg_backend_pid()`
	var vxids []string
	var pids []int32
	rows, err := conn.Query(ctx, `SELECT virtualtransaction, coalesce(min(pid), 0) `+held+` GROUP BY virtualtransaction`, ref.OID)
	if err != nil {
		return fmt.Errorf("copy of %s: list the transactions writing to it: %w", ref, err)
	}
	for rows.Next() {
		var v string
		var pid int32
		if err := rows.Scan(&v, &pid); err != nil {
			rows.Close()
			return err
		}
		vxids, pids = append(vxids, v), append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("copy of %s: list the transactions writing to it: %w", ref, err)
	}
	start, told := time.Now(), false
	for len(vxids) > 0 {
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(DISTINCT virtualtransaction) `+held+` AND virtualtransaction = ANY($2)`, ref.OID, vxids).Scan(&left); err != nil {
			return fmt.Errorf("copy of %s: look at the transactions writing to it: %w", ref, err)
		}
		if left == 0 {
			break
		}
		if !told && time.Since(start) > 2*time.Second {
			told = true
			log.Warn("the copy of a table that joined the publication waits for the transactions that were writing to it then: "+
				"PostgreSQL does not send what they wrote before it joined, so the copy must hold it",
				zap.Stringer("table", ref), zap.Int32s("pids", pids), zap.Int("transactions", left))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(writersPoll):
		}
	}
	if told {
		log.Info("the transactions writing to the table have ended; copying it", zap.Stringer("table", ref), zap.Duration("waited", time.Since(start)))
	}
	return nil
}
