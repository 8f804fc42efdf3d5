package chaostest

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// tally compares the tables row by row, by key and by rev (which every
// update of accounts and docs raises; for docs with the length of the
// TOASTed body): a key PostgreSQL has and ClickHouse lacks, or holds at
// another rev or body length, is lost (or altered); a key only ClickHouse has (a
// delete or a key change not applied) or one it holds twice is doubled.
type tally struct {
	pgRows, chRows int
	lost, doubled  int
	detail         string // the first few differences
}

func (sc *scenario) count() tally {
	sc.t.Helper()
	var tl tally
	var notes []string
	for _, table := range []string{"accounts", "docs", "events"} {
		rev := map[string]string{"accounts": "rev", "docs": "rev * 100000 + length(body)", "events": "0"}[table]
		pgRows, err := sc.pgPairs(fmt.Sprintf("SELECT id, %s FROM %s", rev, table))
		if err != nil {
			sc.t.Fatal(err)
		}
		chRows, dups, err := sc.chPairs(fmt.Sprintf("SELECT toInt64(id), toInt64(%s) FROM `%s`.`%s` FINAL WHERE _ferry_deleted = 0", rev, sc.name, table))
		if err != nil {
			sc.t.Fatal(err)
		}
		tl.pgRows += len(pgRows)
		tl.chRows += len(chRows) + dups
		tl.doubled += dups
		for id, r := range pgRows {
			c, ok := chRows[id]
			switch {
			case !ok:
				tl.lost++
				notes = appendNote(notes, fmt.Sprintf("%s id=%d missing", table, id))
			case c != r:
				tl.lost++
				notes = appendNote(notes, fmt.Sprintf("%s id=%d at rev %d, PostgreSQL %d", table, id, c, r))
			}
		}
		for id := range chRows {
			if _, ok := pgRows[id]; !ok {
				tl.doubled++
				notes = appendNote(notes, fmt.Sprintf("%s id=%d only in ClickHouse", table, id))
			}
		}
	}
	tl.detail = strings.Join(notes, "; ")
	return tl
}

func appendNote(notes []string, n string) []string {
	if len(notes) < 10 {
		return append(notes, n)
	}
	return notes
}

func (sc *scenario) pgPairs(q string) (map[int64]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := sc.s.pg.connect(ctx, sc.name)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[int64]int64{}
	for rows.Next() {
		var id, rev int64
		if err := rows.Scan(&id, &rev); err != nil {
			return nil, err
		}
		m[id] = rev
	}
	return m, rows.Err()
}

// chPairs reads id, rev pairs from ClickHouse; dups counts ids seen twice.
func (sc *scenario) chPairs(q string) (m map[int64]int64, dups int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := sc.s.ch.open("")
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close()
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	m = map[int64]int64{}
	for rows.Next() {
		var id, rev int64
		if err := rows.Scan(&id, &rev); err != nil {
			return nil, 0, err
		}
		if _, ok := m[id]; ok {
			dups++
		}
		m[id] = rev
	}
	return m, dups, rows.Err()
}
