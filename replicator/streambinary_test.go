package replicator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/ferry-cdc/ferry/schema"
)

// TestStreamBinaryMatchesText decodes the same changes of binaryCases'
// values from pgoutput in text and in binary form (binary 'true'), through
// the stream's own conversion (relation.values and keyValues), for both
// kinds of ClickHouse server and Nullable and NullAsDefault columns, and
// wants the same value or the same error, the row's key named alike.
func TestStreamBinaryMatchesText(t *testing.T) {
	ctx, _, conn := stackConn(t, 2*time.Minute)
	name := binaryCaseSchema(ctx, t, conn, "sbin")
	cols := map[string]schema.Column{} // by table name
	var tables []string
	for i, c := range binaryCases {
		table := fmt.Sprintf("t%d", i)
		if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s.%s (id serial PRIMARY KEY, v %s)",
			name, table, strings.Replace(c.typ, "SCHEMA", name, 1))); err != nil {
			t.Fatalf("%s: %v", c.typ, err)
		}
		col := schema.Column{Name: "v"}
		if err := conn.QueryRow(ctx, `SELECT atttypid, atttypmod, typtype = 'e' FROM pg_attribute JOIN pg_type ON pg_type.oid = atttypid
			WHERE attrelid = $1::regclass AND attname = 'v'`, name+"."+table).Scan(&col.TypeOID, &col.TypeMod, &col.Enum); err != nil {
			t.Fatal(err)
		}
		cols[table] = col
		tables = append(tables, name+"."+table)
	}
	pub, slot := name+"_pub", name+"_slot"
	if _, err := conn.Exec(ctx, "CREATE PUBLICATION "+pub+" FOR TABLE "+strings.Join(tables, ", ")); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "DROP PUBLICATION "+pub)
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput', true)", slot); err != nil {
		t.Fatal(err)
	}
	for i, c := range binaryCases {
		table := fmt.Sprintf("%s.t%d", name, i)
		for _, v := range append(c.vals, "NULL") {
			// One statement a value: a value the type refuses on the way in
			// (none should) fails alone.
			if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO %s (v) VALUES (%s)", table, v)); err != nil {
				t.Fatalf("%s: %s: %v", c.typ, v, err)
			}
		}
		if _, err := conn.Exec(ctx, "UPDATE "+table+" SET id = -id WHERE id = 1; DELETE FROM "+table+" WHERE id = 2"); err != nil {
			t.Fatal(err)
		}
	}
	text := peekChanges(ctx, t, conn, slot, pub, false)
	bin := peekChanges(ctx, t, conn, slot, pub, true)
	if len(text) != len(bin) || len(text) == 0 {
		t.Fatalf("%d messages in text, %d in binary", len(text), len(bin))
	}
	binaryFields, errorsSeen, compared := 0, 0, 0
	for _, caps := range []schema.Capabilities{schema.CapabilitiesFor(26, 7), schema.CapabilitiesFor(18, 16)} {
		for _, nullZero := range []bool{false, true} {
			rels := map[uint32]*relation{}
			for i := range text {
				tm, bm := text[i], bin[i]
				if tm.kind != bm.kind {
					t.Fatalf("message %d: %c in text, %c in binary", i, tm.kind, bm.kind)
				}
				if r, ok := tm.msg.(*pglogrepl.RelationMessage); ok {
					tm, err := schema.Map(schema.Table{Schema: name, Name: r.RelationName, NullAsDefault: nullZero, Columns: []schema.Column{
						{Name: "id", TypeOID: 23, TypeMod: -1, NotNull: true, Key: true}, cols[r.RelationName]}}, caps)
					if err != nil {
						t.Fatal(err)
					}
					rels[r.RelationID] = &relation{ref: tableRef{OID: r.RelationID, Schema: name, Name: r.RelationName}, tm: tm}
					if !rels[r.RelationID].readsBinary() {
						t.Fatalf("%s: ferry has no binary reader for %s", r.RelationName, tm.Columns[1].Type)
					}
					continue
				}
				for _, pair := range tuplePairs(t, tm.msg, bm.msg) {
					rel := rels[pair.rel]
					for _, c := range pair.bin.Columns {
						if c.DataType == pglogrepl.TupleDataTypeBinary {
							binaryFields++
						}
					}
					var want, got string
					if pair.key {
						want, got = describeValues(rel.keyValues(pair.text)), describeValues(rel.keyValues(pair.bin))
					} else {
						want, got = describeRow(rel.values(pair.text, nil)), describeRow(rel.values(pair.bin, nil))
					}
					compared++
					if strings.HasPrefix(want, "error") {
						errorsSeen++
					}
					if got != want {
						t.Errorf("%s as %s (NullAsDefault %v), message %d:\n text   %s\n binary %s", rel.ref.Name, rel.tm.Columns[1].Type, nullZero, i, want, got)
					}
				}
			}
		}
	}
	t.Logf("%d binary fields, %d errors, %d tuples compared", binaryFields, errorsSeen, compared)
	if binaryFields == 0 || errorsSeen == 0 || compared < 4*len(binaryCases) {
		t.Errorf("%d binary fields, %d errors, %d tuples compared: the cases are not reached", binaryFields, errorsSeen, compared)
	}
}

type peeked struct {
	kind byte
	msg  pglogrepl.Message
}

// peekChanges decodes what the slot holds, in text or binary form,
// without consuming it: row changes as the stream parses them.
func peekChanges(ctx context.Context, t *testing.T, conn *pgx.Conn, slot, pub string, binary bool) []peeked {
	t.Helper()
	rows, err := conn.Query(ctx, `SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
		'proto_version', '1', 'publication_names', $2, 'binary', $3)`, slot, pub, fmt.Sprint(binary))
	if err != nil {
		t.Fatal(err)
	}
	var out []peeked
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			t.Fatal(err)
		}
		msg, ok := parseRowChange(data)
		if !ok {
			if msg, err = pglogrepl.Parse(data); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, peeked{kind: data[0], msg: msg})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type tuplePair struct {
	rel       uint32
	text, bin *pglogrepl.TupleData
	key       bool // an old key ('K'), read as a delete's key
}

// tuplePairs pairs the tuples of one change decoded in text and in binary.
func tuplePairs(t *testing.T, text, bin pglogrepl.Message) []tuplePair {
	t.Helper()
	switch tm := text.(type) {
	case *pglogrepl.InsertMessage:
		return []tuplePair{{rel: tm.RelationID, text: tm.Tuple, bin: bin.(*pglogrepl.InsertMessage).Tuple}}
	case *pglogrepl.UpdateMessage:
		bm := bin.(*pglogrepl.UpdateMessage)
		pairs := []tuplePair{{rel: tm.RelationID, text: tm.NewTuple, bin: bm.NewTuple}}
		if tm.OldTuple != nil {
			pairs = append(pairs, tuplePair{rel: tm.RelationID, text: tm.OldTuple, bin: bm.OldTuple, key: true})
		}
		return pairs
	case *pglogrepl.DeleteMessage:
		return []tuplePair{{rel: tm.RelationID, text: tm.OldTuple, bin: bin.(*pglogrepl.DeleteMessage).OldTuple, key: true}}
	}
	return nil
}

func describeRow(vals []any, _ int, err error) string { return describeValues(vals, err) }

func describeValues(vals []any, err error) string {
	if err != nil {
		return "error " + err.Error()
	}
	var parts []string
	for _, v := range vals {
		parts = append(parts, describe(v))
	}
	return strings.Join(parts, "; ")
}
