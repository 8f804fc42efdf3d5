package replicator

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/loader"
	"github.com/ferry-cdc/ferry/schema"
)

// message handles a logical decoding message: ferry's DDL events,
// resync requests and heartbeats. Others are not ferry's business.
func (s *stream) message(ctx context.Context, m *pglogrepl.LogicalDecodingMessage, version uint64) error {
	switch m.Prefix {
	case HeartbeatPrefix:
		if t, err := time.Parse(time.RFC3339Nano, string(m.Content)); err == nil {
			s.cfg.Observer.Heartbeat(t)
		}
	case ddlPrefix:
		var ev ddlEvent
		if err := json.Unmarshal(m.Content, &ev); err != nil {
			s.log.Warn("ignoring a ferry.ddl message ferry cannot read", zap.Error(err))
			return nil
		}
		return s.ddl(ctx, ev, version)
	case resyncPrefix:
		var req resyncRequest
		if err := json.Unmarshal(m.Content, &req); err != nil {
			s.log.Warn("ignoring a ferry.resync message ferry cannot read", zap.Error(err))
			return nil
		}
		return s.resync(ctx, req, version)
	}
	return nil
}

// ddl applies one captured DDL command, in stream order: rows before it
// were written with the old shape, rows after it get the new one.
func (s *stream) ddl(ctx context.Context, ev ddlEvent, version uint64) error {
	rel := s.byOID[ev.Table.OID]
	switch {
	case ev.Tag == "DROP TABLE":
		if rel == nil {
			return s.partitionDropped(ctx, ev.Table.OID, version)
		}
		if err := s.abandonResync(ctx, ev.Table.OID, "the table was dropped in PostgreSQL"); err != nil {
			return err
		}
		if err := s.flush(ctx); err != nil {
			return err
		}
		delete(s.byOID, ev.Table.OID)
		s.reportTables()
		s.log.Warn("table dropped in PostgreSQL: ferry stops replicating it; ClickHouse keeps its rows",
			zap.Stringer("table", rel.ref), zap.String("clickhouse_table", rel.tm.Name))
		return nil
	case rel == nil:
		return s.join(ctx, ev.Table.OID)
	}
	return s.evolve(ctx, rel, ev.Table.described(rel.ref.AppendOnly), true, version)
}

// relationMessage checks a table's columns against what ferry mapped. A
// difference is a schema change that ferry's DDL capture did not report
// (it is not installed, or the change came another way): diffed by name, a
// rename looks like a drop and an add. A relation ferry does not know is a
// table newly added to the publication.
//
// pgoutput sends a table's Relation message before the first of its changes
// in a stream, so a stream in binary format checks here that ferry reads
// each of the table's columns in binary form (see binaryStream).
func (s *stream) relationMessage(ctx context.Context, m *pglogrepl.RelationMessage, version uint64) error {
	if err := s.relationChanged(ctx, m, version); err != nil {
		return err
	}
	if rel := s.byOID[m.RelationID]; s.binary && rel != nil && !rel.readsBinary() {
		return fmt.Errorf("table %s: %w", rel.ref, errStreamText)
	}
	return nil
}

func (s *stream) relationChanged(ctx context.Context, m *pglogrepl.RelationMessage, version uint64) error {
	rel := s.byOID[m.RelationID]
	if rel == nil {
		return s.join(ctx, m.RelationID)
	}
	if sameShape(rel, m) {
		return nil
	}
	d, err := s.describeRelation(ctx, rel, m)
	if err != nil {
		return err
	}
	return s.evolve(ctx, rel, d, false, version)
}

func sameShape(rel *relation, m *pglogrepl.RelationMessage) bool {
	cols := rel.tm.Source.Columns
	if len(m.Columns) != len(cols) || m.Namespace != rel.ref.Schema || m.RelationName != rel.ref.Name {
		return false
	}
	for i, c := range m.Columns {
		if c.Name != cols[i].Name || c.DataType != rel.typeOIDs[i] || relationKey(m, c, cols[i]) != cols[i].Key {
			return false
		}
	}
	return true
}

// relationKey tells from a Relation message whether a column is part of the
// key. With REPLICA IDENTITY FULL pgoutput flags every column, so the flag
// says nothing and the key stays what the catalog said.
func relationKey(m *pglogrepl.RelationMessage, c *pglogrepl.RelationMessageColumn, known schema.Column) bool {
	if m.ReplicaIdentity == 'f' {
		return known.Key
	}
	return c.Flags&1 == 1
}

// evolve moves a table to its new description. In-place ClickHouse changes
// are used where they keep every row exact; otherwise the table is rebuilt
// from a fresh copy (see copyFresh) into a shadow table named after
// version, the change's WAL position.
func (s *stream) evolve(ctx context.Context, rel *relation, d described, byAttnum bool, version uint64) error {
	return s.evolveTo(ctx, rel, d, byAttnum, version, false)
}

// evolveTo is evolve, with a rebuild even of an unchanged table when
// rebuild is set (a resync).
func (s *stream) evolveTo(ctx context.Context, rel *relation, d described, byAttnum bool, version uint64, rebuild bool) error {
	if err := s.fit(rel, &d); err != nil {
		return err
	}
	attach := byAttnum && !reflect.DeepEqual(rel.partitions, d.partitions)
	if reflect.DeepEqual(rel.tm.Source, d.table) && !attach && !rebuild {
		rel.typeOIDs, rel.attnums, rel.hasDefault, rel.partitions, rel.doc = d.typeOIDs, d.attnums, d.hasDefault, d.partitions, d.doc
		return s.rep.saveState(ctx, rel)
	}
	// A copy running beside the stream is of the table's shape until now.
	if err := s.settleResync(ctx, rel.ref.OID); err != nil {
		return err
	}
	rel = s.byOID[rel.ref.OID]
	next, err := s.nextRelation(rel, d)
	if err != nil {
		return err
	}
	tm := next.tm
	if err := s.flush(ctx); err != nil {
		return err
	}
	ev, err := s.evolver()
	if err != nil {
		return err
	}
	// A change from before the table's shape is history that a restart
	// brings again (the slot's confirmed position may fall back: before
	// PostgreSQL 17 a shutdown does not save it). Its reverse in place
	// would drop columns that hold values the stream will not bring again
	// (the rows a copy holds): it is applied by a rebuild, whose copy reads
	// the table as it is now, and which the changes that follow, up to the
	// shape, rebuild again (the copy marks the table stale).
	historic := version < rel.shapedAt
	next.shapedAt = max(rel.shapedAt, version)
	for oid, other := range s.byOID {
		if oid != rel.ref.OID && other.tm.Name == tm.Name {
			return fmt.Errorf("tables %s and %s would both become ClickHouse table %q: rename one", other.ref, next.ref, tm.Name)
		}
	}
	if err := ev.RenameTable(ctx, rel.tm, tm); err != nil {
		return err
	}
	var renames map[string]string
	if byAttnum {
		renames = renamedColumns(rel, d)
	}
	changes := schema.Diff(rel.tm, tm, renames)
	// A FullRow table's row key encodes every column: after any column
	// change the rows already in ClickHouse carry keys that the stream's
	// old-row identities no longer produce, so only a copy re-keys them.
	fullRow := rel.tm.Source.FullRow && len(changes) > 0
	rebuild = rebuild || attach || rel.stale || fullRow || historic || !schema.SameKey(rel.tm, tm)
	for _, c := range changes {
		added := c.Kind == schema.ColumnAdded && next.addedWithDefault(c.To.Name)
		rebuild = rebuild || added || !schema.InPlace(c, s.rep.caps)
	}
	if !rebuild {
		if err := ev.AlterTable(ctx, tm, changes); err != nil {
			s.log.Warn("ClickHouse refused the in-place change; rebuilding the table instead", zap.Stringer("table", next.ref), zap.Error(err))
			rebuild = true
		}
	}
	if rebuild {
		s.log.Info("schema change needs the ClickHouse table rebuilt: copying the table into a new one and swapping it in",
			zap.Stringer("table", next.ref), zap.Int("changes", len(changes)), zap.Bool("partitions_changed", attach), zap.Bool("replayed", historic))
		conn, err := s.pg(ctx)
		if err != nil {
			return err
		}
		if err := refreshLeaves(ctx, conn, next); err != nil {
			return err
		}
		next.keyNullsApart()
		if err := s.rebuild(ctx, next, version); err != nil {
			return err
		}
	}
	s.byOID[rel.ref.OID] = next
	if next.ref != rel.ref || next.tm.Name != rel.tm.Name {
		s.reportTables()
	}
	if err := s.rep.saveState(ctx, next); err != nil {
		return err
	}
	s.log.Info("schema change applied", zap.Stringer("table", next.ref), zap.Int("changes", len(changes)), zap.Bool("rebuilt", rebuild))
	return nil
}

// fit makes d, a table's description from the catalog, a Relation message
// or a captured DDL, describe the table as ferry replicates it: the same
// columns kept, filters, options and row key encoding.
func (s *stream) fit(rel *relation, d *described) error {
	if rel.ref.AppendOnly {
		d.table.AppendOnly = true
	}
	d.restrict(rel.doc.Kept, rel.doc.RowFilter, rel.doc.Excluded)
	d.table.FullRow = d.ident == 'f' && !hasKey(d.table) && !d.table.AppendOnly
	d.table.NullAsDefault = rel.tm.Source.NullAsDefault
	d.table.NativeJSON = rel.tm.Source.NativeJSON
	if err := applyTextColumns(&d.table, s.rep.textCols[rel.ref.String()]); err != nil {
		return err
	}
	// The catalog's leaves (in a captured DDL's description too) may show a
	// partition change the stream did not carry: only a copy explains them.
	d.doc.Leaves = rel.doc.Leaves
	// The row key encoding is the ClickHouse rows', which only a copy changes.
	d.table.DistinctNull, d.doc.DistinctNull = rel.tm.Source.DistinctNull, rel.doc.DistinctNull
	return nil
}

// nextRelation maps d, fitted, to the relation that replaces rel, which
// keeps rel's stream state.
func (s *stream) nextRelation(rel *relation, d described) (*relation, error) {
	tm, err := schema.Map(d.table, s.rep.caps)
	if err != nil {
		return nil, err
	}
	if err := s.rep.shape(tm, rel.ref); err != nil {
		return nil, err
	}
	next := newRelation(tableRef{OID: rel.ref.OID, Schema: d.table.Schema, Name: d.table.Name, AppendOnly: rel.ref.AppendOnly}, tm, d)
	next.copied = rel.copied // until a rebuild's copy replaces it
	next.truncated = rel.truncated
	next.member = rel.member
	next.recopy, next.leftToCopy = rel.recopy, rel.leftToCopy
	next.joining = rel.joining
	return next, nil
}

// renamedColumns pairs columns by attnum, which a rename keeps. Columns
// whose attnum is unknown (0: described from a Relation message) pair with
// nothing.
func renamedColumns(rel *relation, d described) map[string]string {
	byNum := map[int]string{}
	for i, n := range d.attnums {
		if n > 0 {
			byNum[n] = d.table.Columns[i].Name
		}
	}
	renames := map[string]string{}
	for i, n := range rel.attnums {
		if name, ok := byNum[n]; ok && name != rel.tm.Source.Columns[i].Name {
			renames[rel.tm.Source.Columns[i].Name] = name
		}
	}
	return renames
}

// addedWithDefault reports whether a column was added with a default, so
// that the rows already there hold a value ClickHouse does not have.
func (r *relation) addedWithDefault(name string) bool {
	for i, c := range r.tm.Source.Columns {
		if c.Name == name && i < len(r.hasDefault) {
			return r.hasDefault[i]
		}
	}
	return true // unknown: assume the worst, a rebuild is always exact
}

// join starts replicating a table that appeared in the stream: created, or
// added to the publication. Its ClickHouse table is created and its rows
// copied (see copyFresh), so changes after this point win over them.
func (s *stream) join(ctx context.Context, oid uint32) error {
	if s.skipped[oid] {
		return nil
	}
	conn, err := s.pg(ctx)
	if err != nil {
		return err
	}
	if err := s.awaitVisible(ctx, conn); err != nil {
		return err
	}
	published, err := s.rep.published(ctx, conn, oid)
	if err != nil {
		return err
	}
	if published == nil {
		s.log.Debug("a table in the stream that ferry does not replicate: leaving it out", zap.Uint32("oid", oid))
		s.skipped[oid] = true
		return nil
	}
	rels, err := s.rep.relations(ctx, conn, []tableRef{*published}, nil)
	if err != nil || len(rels) == 0 {
		s.skipped[oid] = true
		return err
	}
	rel := rels[0]
	for _, other := range s.byOID {
		if other.tm.Name == rel.tm.Name {
			return fmt.Errorf("tables %s and %s would both become ClickHouse table %q: rename one", other.ref, rel.ref, rel.tm.Name)
		}
	}
	if err := s.flush(ctx); err != nil {
		return err
	}
	if err := s.sink.Prepare(ctx, []*schema.TableMap{rel.tm}); err != nil {
		return err
	}
	rel.joining = true
	if err := s.copyKeepingAlive(ctx, rel, rel.tm); err != nil {
		return err
	}
	s.byOID[oid] = rel
	s.reportTables()
	if err := s.rep.saveState(ctx, rel); err != nil {
		return err
	}
	s.log.Info("a new table joined replication", zap.Stringer("table", rel.ref), zap.String("clickhouse_table", rel.tm.Name))
	return nil
}

// rebuild copies the table into a shadow ClickHouse table and swaps it in.
func (s *stream) rebuild(ctx context.Context, rel *relation, version uint64) error {
	ev, err := s.evolver()
	if err != nil {
		return err
	}
	shadow, err := s.makeShadow(ctx, rel.tm, version)
	if err != nil {
		return err
	}
	if err := s.copyKeepingAlive(ctx, rel, shadow); err != nil {
		return err
	}
	return ev.SwapTable(ctx, rel.tm, shadow)
}

// makeShadow makes the empty table a rebuild of tm at version copies into.
func (s *stream) makeShadow(ctx context.Context, tm *schema.TableMap, version uint64) (*schema.TableMap, error) {
	shadow := *tm
	shadow.Name = fmt.Sprintf("%s__ferry_rebuild_%x", tm.Name, version)
	// A shadow of that name is left over from a rebuild cut short, maybe
	// to another shape (the changes replayed from a streamed transaction's
	// spill can share a version): ferry's own scratch table, made anew.
	if err := s.dropTable(ctx, shadow.Name); err != nil {
		return nil, err
	}
	if err := s.sink.Prepare(ctx, []*schema.TableMap{&shadow}); err != nil {
		return nil, err
	}
	return &shadow, nil
}

// dropTable drops a ClickHouse table of ferry's own, where the sink can.
func (s *stream) dropTable(ctx context.Context, name string) error {
	if d, ok := s.sink.(interface {
		DropTable(ctx context.Context, name string) error
	}); ok {
		return d.DropTable(ctx, name)
	}
	return nil
}

// copyKeepingAlive copies a table while the stream waits, answering the
// server meanwhile so that wal_sender_timeout does not end the connection.
func (s *stream) copyKeepingAlive(ctx context.Context, rel *relation, target *schema.TableMap) error {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.cfg.StandbyInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := s.sendStatus(false); err != nil {
					s.log.Warn("status update during a table copy failed", zap.Error(err))
				}
			}
		}
	}()
	err := s.rep.copyFresh(ctx, rel, target)
	close(stop)
	<-done
	return err
}

func (s *stream) evolver() (loader.Evolver, error) {
	ev, ok := s.sink.(loader.Evolver)
	if !ok {
		return nil, fmt.Errorf("the destination cannot change its tables' shape, so the schema change cannot be applied")
	}
	return ev, nil
}

// pg returns the stream's SQL connection, opening it on first use.
func (s *stream) pg(ctx context.Context) (*pgx.Conn, error) {
	if s.sql == nil {
		conn, err := connect(ctx, s.cfg.ConnString)
		if err != nil {
			return nil, err
		}
		s.sql = conn
	}
	return s.sql, nil
}

// describeRelation describes a table from its Relation message, with type
// details (domains, enums, arrays) from the catalog by type OID. The message
// says nothing of NOT NULL or defaults: a column keeps what ferry knew of
// it, and a new one is taken as nullable and as having a default (which
// means a rebuild, exact whatever the truth).
func (s *stream) describeRelation(ctx context.Context, rel *relation, m *pglogrepl.RelationMessage) (described, error) {
	conn, err := s.pg(ctx)
	if err != nil {
		return described{}, err
	}
	known := map[string]schema.Column{}
	for _, c := range rel.tm.Source.Columns {
		known[c.Name] = c
	}
	attnum := map[string]int{}
	for i, c := range rel.tm.Source.Columns {
		if i < len(rel.attnums) {
			attnum[c.Name] = rel.attnums[i]
		}
	}
	doc := catalogTable{OID: rel.ref.OID, Schema: m.Namespace, Name: m.RelationName, Ident: string(rune(m.ReplicaIdentity)),
		Kind: rel.doc.Kind, Partitions: rel.partitions}
	for _, mc := range m.Columns {
		var ct catalogColumn
		err := conn.QueryRow(ctx, typeJSON, mc.DataType, mc.TypeModifier).Scan(&ct)
		if err != nil {
			return described{}, fmt.Errorf("describe the type of %s.%s: %w", rel.ref, mc.Name, err)
		}
		old, had := known[mc.Name]
		ct.Name, ct.Key, ct.TypMod, ct.Attnum = mc.Name, relationKey(m, mc, old), mc.TypeModifier, attnum[mc.Name]
		ct.NotNull, ct.HasDefault = had && old.NotNull, !had
		if had {
			ct.Dims = old.Dims // the message does not say it either
		}
		doc.Columns = append(doc.Columns, ct)
	}
	return doc.described(rel.ref.AppendOnly), nil
}

// typeJSON describes a type OID with a typmod as a catalogColumn.
const typeJSON = `SELECT jsonb_build_object('typid', t.oid::bigint, 'typname', format_type(t.oid, $2::int),
	'basename', coalesce(et.typname, bt.typname),
	'typtype', t.typtype::text, 'basetype', t.typbasetype::bigint, 'basetypmod', t.typtypmod,
	'elem', CASE WHEN bt.typcategory = 'A' THEN bt.typelem::bigint ELSE 0 END,
	'elemtype', CASE WHEN bt.typtype = 'e' THEN 'e' ELSE coalesce(et.typtype::text, '') END)
FROM pg_type t JOIN pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
LEFT JOIN pg_type et ON et.oid = bt.typelem AND bt.typcategory = 'A' WHERE t.oid = $1`
