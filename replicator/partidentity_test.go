package replicator_test

import "testing"

// TestPartitionRootFullIdentity: REPLICA IDENTITY FULL set on a
// partitioned table's root only. pgoutput marks the old rows of its
// updates and deletes as whole, but the leaf, which kept its default
// identity, logged only the key: the other columns come as NULL, NOT NULL
// ones too. Decoding that row for Kafka's `before` stopped the stream
// ("NULL in a NOT NULL column"; found by ferry torture, seed 771526 round 8).
func TestPartitionRootFullIdentity(t *testing.T) {
	e := newEnv(t)
	e.exec(`CREATE TABLE p (id int, d int NOT NULL, v text NOT NULL, PRIMARY KEY (id, d)) PARTITION BY RANGE (d)`,
		`CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (0) TO (100)`,
		`INSERT INTO p SELECT g, g % 100, 'v' || g FROM generate_series(1, 50) g`)
	cfg := e.config()
	e.mustCatchUp(cfg)
	e.exec(`ALTER TABLE p REPLICA IDENTITY FULL`, `UPDATE p SET v = 'new' WHERE id <= 10`, `DELETE FROM p WHERE id > 40`)
	e.mustCatchUp(cfg)
	if n := e.verifyAll(cfg)["public.p"]; n != 40 {
		t.Errorf("p: %d rows, want 40", n)
	}
}
