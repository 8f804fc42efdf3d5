package replicator

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/ferry-cdc/ferry/schema"
)

// randomTuple is a TupleData of random columns: text and binary of random
// lengths (none too), NULL and unchanged TOAST.
func randomTuple(r *rand.Rand) []byte {
	cols := r.IntN(20) // every size of room newTuple has, and beyond
	b := binary.BigEndian.AppendUint16(nil, uint16(cols))
	for range cols {
		switch k := []byte{'t', 'b', 'n', 'u'}[r.IntN(4)]; k {
		case 't', 'b':
			data := make([]byte, r.IntN(3)*r.IntN(40))
			for i := range data {
				data[i] = byte(r.IntN(256))
			}
			b = append(b, k)
			b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
			b = append(b, data...)
		default:
			b = append(b, k)
		}
	}
	return b
}

// TestParseRowChange: the decoder of inserts, updates and deletes gives
// what pglogrepl.Parse gives, for random tuples of every kind of column,
// and leaves what it does not expect to pglogrepl.
func TestParseRowChange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		rel := binary.BigEndian.AppendUint32(nil, r.Uint32())
		var data []byte
		switch i % 5 {
		case 0:
			data = append(append(append([]byte{'I'}, rel...), 'N'), randomTuple(r)...)
		case 1:
			data = append(append(append([]byte{'U'}, rel...), 'N'), randomTuple(r)...)
		case 2, 3:
			old := []byte{'K', 'O'}[i%2]
			data = append(append(append(append(append([]byte{'U'}, rel...), old), randomTuple(r)...), 'N'), randomTuple(r)...)
		case 4:
			data = append(append(append([]byte{'D'}, rel...), []byte{'K', 'O'}[r.IntN(2)]), randomTuple(r)...)
		}
		if err := checkTuples(data); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		got, ok := parseRowChange(data)
		want, err := pglogrepl.Parse(data)
		if data[0] == 'I' && len(data) < 9 { // pglogrepl wants 8 bytes after the type
			if ok {
				t.Errorf("message %d (%x): decoded what pglogrepl refuses (%v)", i, data, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("message %d (%x): pglogrepl: %v", i, data, err)
		}
		if !ok {
			t.Fatalf("message %d (%x): not decoded", i, data)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("message %d (%x):\n got %#v\nwant %#v", i, data, got, want)
		}
	}
	// Messages it leaves to pglogrepl.
	for _, data := range [][]byte{{'I', 0, 0, 0, 1}, {'I', 0, 0, 0, 1, 'K', 0, 0}, {'D', 0, 0, 0, 1, 'N', 0, 0}, {'U', 0, 0, 0, 1, 'X', 0, 0}, {'B'}} {
		if _, ok := parseRowChange(data); ok {
			t.Errorf("%x: decoded, want it left to pglogrepl", data)
		}
	}
}

// BenchmarkParseInsert decodes an insert of the catch-up's orders row.
func BenchmarkParseInsert(b *testing.B) {
	data := append([]byte{'I'}, binary.BigEndian.AppendUint32(nil, 16384)...)
	data = append(data, 'N', 0, 4)
	for _, v := range []string{"123456", "4242", "512.37", "2026-12-07 08:36:15.123456+00"} {
		data = append(data, 't')
		data = binary.BigEndian.AppendUint32(data, uint32(len(v)))
		data = append(data, v...)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := parseRowChange(data); !ok {
			b.Fatal("not decoded")
		}
	}
}

// BenchmarkRowValues converts the catch-up's orders row as the stream
// does (relation.values), from pgoutput's text form and from its binary
// form, for each kind of ClickHouse server.
func BenchmarkRowValues(b *testing.B) {
	at := time.Date(2026, 12, 7, 8, 36, 15, 123456000, time.UTC)
	pgMicros := at.UnixMicro() - time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	numeric := []byte{0, 2, 0, 0, 0, 0, 0, 2, 0x02, 0x00, 0x0e, 0x74} // 512.37: digits 512 and 3700, weight 0, dscale 2
	forms := map[string][]pglogrepl.TupleDataColumn{
		"text": {
			{DataType: 't', Data: []byte("123456")}, {DataType: 't', Data: []byte("4242")},
			{DataType: 't', Data: []byte("512.37")}, {DataType: 't', Data: []byte("2026-12-07 08:36:15.123456+00")}},
		"binary": {
			{DataType: 'b', Data: binary.BigEndian.AppendUint64(nil, 123456)}, {DataType: 'b', Data: binary.BigEndian.AppendUint64(nil, 4242)},
			{DataType: 'b', Data: numeric}, {DataType: 'b', Data: binary.BigEndian.AppendUint64(nil, uint64(pgMicros))}},
	}
	for _, server := range []struct {
		name string
		caps schema.Capabilities
	}{{"26.7", schema.CapabilitiesFor(26, 7)}, {"18.16", schema.CapabilitiesFor(18, 16)}} {
		tm, err := schema.Map(schema.Table{Schema: "public", Name: "orders", Columns: []schema.Column{
			{Name: "id", TypeOID: 20, TypeMod: -1, NotNull: true, Key: true},
			{Name: "customer_id", TypeOID: 20, TypeMod: -1, NotNull: true},
			{Name: "total", TypeOID: 1700, TypeMod: (10<<16 | 2) + 4, NotNull: true},
			{Name: "created_at", TypeOID: 1184, TypeMod: -1, NotNull: true}}}, server.caps)
		if err != nil {
			b.Fatal(err)
		}
		rel := &relation{tm: tm}
		var want string
		for _, form := range []string{"text", "binary"} {
			tuple := &pglogrepl.TupleData{ColumnNum: 4}
			for i := range forms[form] {
				tuple.Columns = append(tuple.Columns, &forms[form][i])
			}
			vals, _, err := rel.values(tuple, nil)
			if err != nil {
				b.Fatal(err)
			}
			if got := fmt.Sprint(vals); want == "" {
				want = got
			} else if got != want {
				b.Fatalf("%s: binary gives %s, text %s", server.name, got, want)
			}
			b.Run(server.name+"/"+form, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := rel.values(tuple, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
