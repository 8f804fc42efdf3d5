package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/replicator"
)

// TestStatusBook feeds the observer as the replicator does and checks
// the page's tables: copies counted (a rebuild's copy is a second one),
// changes counted by op, applied only once a flush or a confirmation
// follows, and a renamed table's old entry marked as no longer replicated.
func TestStatusBook(t *testing.T) {
	o := newObserver(nil)
	o.Tables([]replicator.ReplicatedTable{{Table: "public.a", Schema: "public", Name: "a", Destination: "a"}})
	o.SnapshotProgress("public.a", 0, 10, false)
	o.SnapshotProgress("public.a", 6, 10, false)
	tb := o.book.snapshot()
	if len(tb) != 1 || tb[0].Copy == nil || tb[0].Copy.Rows != 6 || tb[0].Copy.Done || tb[0].Copy.Copies != 1 {
		t.Fatalf("during the copy: %+v", tb)
	}
	o.SnapshotProgress("public.a", 10, 10, true)
	o.Change("public.a", "insert")
	o.Change("public.a", "insert")
	o.Change("public.a", "delete")
	if tb = o.book.snapshot(); tb[0].LastApplied != nil {
		t.Errorf("applied before any flush: %+v", tb[0])
	}
	o.Flushed(3, time.Millisecond)
	tb = o.book.snapshot()
	if tb[0].LastApplied == nil || tb[0].Streamed != (pageOps{Insert: 2, Delete: 1}) || !tb[0].Copy.Done || tb[0].Copy.Finished == nil {
		t.Errorf("after the flush: %+v", tb[0])
	}
	applied := *tb[0].LastApplied
	o.Change("public.a", "truncate") // written at once, without a flush: the next confirmation tells
	o.Confirmed(100, time.Time{})
	if tb = o.book.snapshot(); !tb[0].LastApplied.After(applied) || tb[0].Streamed.Truncate != 1 {
		t.Errorf("after the confirmation: %+v", tb[0])
	}
	// A rebuild copies the table again, then it is renamed.
	o.SnapshotProgress("public.a", 0, 10, false)
	o.SnapshotProgress("public.a", 10, 10, true)
	o.Tables([]replicator.ReplicatedTable{{Table: "public.b", Schema: "public", Name: "b", Destination: "b"}})
	tb = o.book.snapshot()
	if len(tb) != 2 || tb[0].Table != "public.b" || !tb[0].Replicated || tb[1].Table != "public.a" || tb[1].Replicated || tb[1].Copy.Copies != 2 {
		t.Errorf("after the rebuild and the rename: %+v", tb)
	}
}

// TestStatusPageRedacts: the page's JSON shows the connection strings
// without their passwords, and scrubs a password that reached an error.
func TestStatusPageRedacts(t *testing.T) {
	o := newObserver(nil)
	c := &runCmd{Sink: "clickhouse"}
	c.Slot = "ferry"
	c.PG = "postgres://ferry:pg-Secret-1@db.example:5432/shop"
	c.CH = "clickhouse://default:ch-Secret-2@ch.example:9000/default"
	p := newStatusPage(o, c)
	o.Retry("postgres", errors.New("connect to ch-Secret-2 and pg-Secret-1"))
	mux := http.NewServeMux()
	p.register(mux)
	for _, path := range []string{"/status.json", "/"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		body := rec.Body.String()
		if rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s: %d, headers %v", path, rec.Code, rec.Header())
		}
		if strings.Contains(body, "Secret") {
			t.Errorf("GET %s shows a password:\n%s", path, body)
		}
		if path == "/status.json" {
			var st pageStatus
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
				t.Fatal(err)
			}
			if st.Source != "postgres://ferry:xxxxx@db.example:5432/shop" || st.Destination != "clickhouse://default:xxxxx@ch.example:9000/default, database shop" ||
				st.LastError == nil || st.LastError.Message != "connect to xxxxx and xxxxx" || st.Retries != 1 {
				t.Errorf("status.json: %+v", st)
			}
		}
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/other", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /other: %d, want 404", rec.Code)
	}
}

// TestStatusPageKafka: with --sink kafka the page names the brokers and
// each table's topic, and never the SASL password.
func TestStatusPageKafka(t *testing.T) {
	o := newObserver(nil)
	c := &runCmd{Sink: "kafka"}
	c.PG = "postgres://ferry@db.example/shop"
	c.KafkaBrokers, c.TopicPrefix, c.SASLPassword = []string{"k1:9092", "k2:9092"}, "cdc", "kafka-Secret-3"
	p := newStatusPage(o, c)
	o.Tables([]replicator.ReplicatedTable{{Table: "public.odd name", Schema: "public", Name: "odd name", Destination: "odd name"}})
	o.Retry("clickhouse", errors.New("SASL refused kafka-Secret-3"))
	st := p.status()
	if st.Destination != "Kafka k1:9092,k2:9092, topics cdc.*" || len(st.Tables) != 1 || st.Tables[0].Destination != "cdc.public.odd_name" ||
		st.LastError.Message != "SASL refused xxxxx" {
		t.Errorf("status: %+v", st)
	}
}
