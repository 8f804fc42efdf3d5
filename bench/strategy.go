package bench

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// Schema is where the benchmark's tables live.
const Schema = "ferry_bench"

// keyKind is how a strategy's keys come to be.
type keyKind int

const (
	serverInt  keyKind = iota // a sequence or identity: ids 1..N after seeding
	serverUUID                // a server-side default (uuidv7())
	clientInt                 // generated in Go, bigint
	clientUUID                // generated in Go, uuid
)

// Strategy is one primary-key strategy: a table and where its keys come from.
type Strategy struct {
	Name string
	kind keyKind
	// uuidVersion is the version every key must carry; 0 for bigint keys.
	uuidVersion int
	// needsUUIDv7 marks a strategy that needs the server's uuidv7() (PG 18).
	needsUUIDv7 bool
	// fillfactor is the PK index's fillfactor; 0 means the btree default.
	fillfactor int
	// partitions > 0 hash-partitions the table by id.
	partitions bool
}

// Strategies lists every strategy, in report order.
var Strategies = []Strategy{
	{Name: "bigserial", kind: serverInt},
	{Name: "identity", kind: serverInt},
	{Name: "uuidv4", kind: clientUUID, uuidVersion: 4},
	{Name: "uuidv7", kind: clientUUID, uuidVersion: 7},
	{Name: "uuidv7-mono", kind: clientUUID, uuidVersion: 7},
	{Name: "hash8", kind: serverInt, partitions: true},
	{Name: "fillfactor70", kind: serverInt, fillfactor: 70},
	{Name: "snowflake", kind: clientInt},
	{Name: "uuidv7-native", kind: serverUUID, uuidVersion: 7, needsUUIDv7: true},
}

func strategyByName(name string) (Strategy, error) {
	for _, s := range Strategies {
		if s.Name == name {
			return s, nil
		}
	}
	names := make([]string, len(Strategies))
	for i, s := range Strategies {
		names[i] = s.Name
	}
	return Strategy{}, fmt.Errorf("unknown strategy %q: choose from %s", name, strings.Join(names, ", "))
}

// Table is the strategy's table name within Schema.
func (s Strategy) Table() string { return "orders_" + strings.ReplaceAll(s.Name, "-", "_") }

// Qualified is the quoted schema.table.
func (s Strategy) Qualified() string { return Schema + "." + s.Table() }

func (s Strategy) clientKeys() bool { return s.kind == clientInt || s.kind == clientUUID }

// DDL returns the statements that create the strategy's table.
func (s Strategy) DDL(partitions, payload int) []string {
	var id string
	switch s.kind {
	case serverInt:
		id = "id bigserial"
		if s.Name == "identity" {
			id = "id bigint GENERATED ALWAYS AS IDENTITY"
		}
	case serverUUID:
		id = "id uuid DEFAULT uuidv7()"
	case clientInt:
		id = "id bigint"
	case clientUUID:
		id = "id uuid"
	}
	cols := []string{id + " NOT NULL", "customer_id bigint NOT NULL", "total numeric(10,2) NOT NULL",
		"created_at timestamptz NOT NULL DEFAULT now()"}
	if payload > 0 {
		cols = append(cols, "payload text NOT NULL")
	}
	pk := "PRIMARY KEY (id)"
	if s.fillfactor > 0 {
		pk += fmt.Sprintf(" WITH (fillfactor = %d)", s.fillfactor)
	}
	create := "CREATE TABLE " + s.Qualified() + " (\n  " + strings.Join(append(cols, pk), ",\n  ") + "\n)"
	if !s.partitions {
		return []string{create}
	}
	stmts := []string{create + " PARTITION BY HASH (id)"}
	for i := 0; i < partitions; i++ {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s_p%d PARTITION OF %s FOR VALUES WITH (MODULUS %d, REMAINDER %d)",
			s.Qualified(), i, s.Qualified(), partitions, i))
	}
	return stmts
}

// keyGen hands out one client's keys as query arguments.
type keyGen interface {
	next() any
	// batch returns n keys as an array argument.
	batch(n int) any
}

type uuidKeys struct{ next16 func() UUID }

func (g uuidKeys) next() any { return pgtype.UUID{Bytes: g.next16(), Valid: true} }
func (g uuidKeys) batch(n int) any {
	out := make([]pgtype.UUID, n)
	for i := range out {
		out[i] = pgtype.UUID{Bytes: g.next16(), Valid: true}
	}
	return out
}

type intKeys struct{ next64 func() int64 }

func (g intKeys) next() any { return g.next64() }
func (g intKeys) batch(n int) any {
	out := make([]int64, n)
	for i := range out {
		out[i] = g.next64()
	}
	return out
}

// generator returns the key generator of one stream (a client, or the
// seeding pass); nil for server-side keys.
func (s Strategy) generator(seed uint64, stream int, clock Clock) keyGen {
	st := uint64(stream)
	switch s.Name {
	case "uuidv4":
		return uuidKeys{NewUUIDv4(seed, st).Next}
	case "uuidv7":
		return uuidKeys{NewUUIDv7(seed, st, clock).Next}
	case "uuidv7-mono":
		return uuidKeys{NewUUIDv7Mono(seed, st, clock).Next}
	case "snowflake":
		return intKeys{NewSnowflake(stream, clock).Next}
	}
	return nil
}

// existingKeys holds the seeded keys that update workloads pick from.
type existingKeys struct {
	n     int
	ints  []int64 // nil with serial keys: the keys are 1..n
	uuids []UUID
}

func (k *existingKeys) at(i int) any {
	switch {
	case k.uuids != nil:
		return pgtype.UUID{Bytes: k.uuids[i], Valid: true}
	case k.ints != nil:
		return k.ints[i]
	}
	return int64(i + 1)
}
