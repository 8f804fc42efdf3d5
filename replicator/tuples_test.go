package replicator

import (
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/jackc/pglogrepl"
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
