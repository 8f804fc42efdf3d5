package replicator

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// minRangePages is the smallest share of a table one COPY reads (8 MiB of
// 8 KiB pages): below it a query's start-up and the extra ClickHouse part
// it leaves cost more than running it beside the others gains.
const minRangePages = 1024

// pageRange is a run of a table's heap pages, [from, to). from 0 has no
// lower bound and to 0 no upper one, so the first and last ranges of a
// split also take rows on pages the split did not know of.
type pageRange struct{ from, to uint32 }

// where is the range's condition on ctid; "" for the whole table.
// PostgreSQL 14 and later read such a range with a TID Range Scan, only
// its pages.
func (p pageRange) where() string {
	switch {
	case p.from == 0 && p.to == 0:
		return ""
	case p.from == 0:
		return fmt.Sprintf(" WHERE ctid < '(%d,0)'::tid", p.to)
	case p.to == 0:
		return fmt.Sprintf(" WHERE ctid >= '(%d,0)'::tid", p.from)
	}
	return fmt.Sprintf(" WHERE ctid >= '(%d,0)'::tid AND ctid < '(%d,0)'::tid", p.from, p.to)
}

// splitPages cuts a table of pages heap pages into at most parts ranges of
// at least minRangePages each that together cover every page, also any
// added after pages was read. A small table is one range.
func splitPages(pages uint32, parts int) []pageRange {
	n := int(pages / minRangePages)
	if n > parts {
		n = parts
	}
	if n <= 1 {
		return []pageRange{{}}
	}
	out := make([]pageRange, n)
	step := pages / uint32(n)
	for i := range out {
		out[i].from = uint32(i) * step
		out[i].to = uint32(i+1) * step
	}
	out[n-1].to = 0
	return out
}

// copyRanges plans how a table is read: in page ranges when more than one
// worker copies and the server reads a ctid range without a full scan
// (PostgreSQL 14 and later), for plain tables only (a partitioned table's
// rows live in its partitions, whose pages ctid does not tell apart).
func copyRanges(ctx context.Context, conn *pgx.Conn, oid uint32, workers int) ([]pageRange, error) {
	if workers <= 1 || serverMajor(conn.PgConn()) < 14 {
		return []pageRange{{}}, nil
	}
	var kind string
	var pages int64
	err := conn.QueryRow(ctx, `SELECT relkind::text, pg_relation_size(oid) / current_setting('block_size')::bigint
		FROM pg_class WHERE oid = $1`, oid).Scan(&kind, &pages)
	if err != nil {
		return nil, fmt.Errorf("read the size of table %d: %w", oid, err)
	}
	if kind != "r" || pages <= 0 || pages > 1<<32-1 {
		return []pageRange{{}}, nil
	}
	return splitPages(uint32(pages), workers), nil
}
