package replicator

import (
	"encoding/json"
	"testing"
)

// TestRowKeyMarkerKept: a table state stored before ferry keyed NULL apart
// from \N has no marker and keeps the old row keys; one stored since keeps
// the new. Only a copy into an empty table switches (keyNullsApart).
func TestRowKeyMarkerKept(t *testing.T) {
	for _, c := range []struct {
		stored string
		want   bool
	}{
		{`{"oid": 1, "schema": "public", "name": "t", "ident": "f", "kind": "r", "columns": []}`, false},
		{`{"oid": 1, "schema": "public", "name": "t", "ident": "f", "kind": "r", "columns": [], "distinct_null": true}`, true},
	} {
		var ct catalogTable
		if err := json.Unmarshal([]byte(c.stored), &ct); err != nil {
			t.Fatal(err)
		}
		d := ct.described(false)
		if d.table.DistinctNull != c.want {
			t.Errorf("%s: DistinctNull %v, want %v", c.stored, d.table.DistinctNull, c.want)
		}
		again, err := json.Marshal(d.doc)
		if err != nil {
			t.Fatal(err)
		}
		var back catalogTable
		if err := json.Unmarshal(again, &back); err != nil || back.DistinctNull != c.want {
			t.Errorf("%s: stored again as %s", c.stored, again)
		}
		d.keyNullsApart()
		if !d.table.DistinctNull || !d.doc.DistinctNull {
			t.Errorf("%s: a fresh copy does not key NULL apart", c.stored)
		}
	}
}
