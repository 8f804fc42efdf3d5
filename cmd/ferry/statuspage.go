package main

import (
	"context"
	"embed"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ferry-cdc/ferry/loader/kafka"
	"github.com/ferry-cdc/ferry/replicator"
)

// The page is static: its script polls status.json and draws it with DOM
// calls that set text, never markup, so a table's name cannot become HTML.
//
//go:embed statuspage
var statusFiles embed.FS

const (
	// lagSampleEvery and lagSamples: the lag chart's history, kept here so
	// that a page opened now shows the last minutes at once.
	lagSampleEvery = 2 * time.Second
	lagSamples     = 180
)

// statusPage serves ferry run's status page, /, and the JSON document it
// polls, /status.json, beside /metrics.
type statusPage struct {
	o       *observer
	info    pageInfo
	secrets []string // scrubbed from every text the page shows
	topic   func(replicator.ReplicatedTable) string

	mu      sync.Mutex
	history []lagSample // oldest first, at most lagSamples
}

// pageInfo is what does not change while ferry runs.
type pageInfo struct {
	Version     string    `json:"version"`
	Started     time.Time `json:"started"`
	Slot        string    `json:"slot"`
	Sink        string    `json:"sink"`        // clickhouse or kafka
	Source      string    `json:"source"`      // PostgreSQL's URL, password redacted
	Destination string    `json:"destination"` // ClickHouse's URL and database, or the brokers
}

// pageStatus is /status.json.
type pageStatus struct {
	pageInfo
	Now        time.Time   `json:"now"`
	State      string      `json:"state"` // starting, copying, streaming
	Lag        pageLag     `json:"lag"`
	LagHistory []lagSample `json:"lag_history"`
	Slot       *pageSlot   `json:"slot_health,omitempty"`
	Heartbeat  *time.Time  `json:"last_heartbeat,omitempty"`
	Retries    uint64      `json:"retries"`
	LastError  *pageError  `json:"last_error,omitempty"`
	Tables     []pageTable `json:"tables"`
}

type pageLag struct {
	// Bytes and Seconds are those of ferry_lag_bytes and ferry_lag_seconds;
	// null before the stream reported them. The stream is one for every
	// table, so its lag is every table's.
	Bytes        *uint64  `json:"bytes"`
	Seconds      *float64 `json:"seconds"`
	ConfirmedLSN string   `json:"confirmed_lsn,omitempty"`
	ServerLSN    string   `json:"server_lsn,omitempty"`
}

// lagSample is one point of the lag chart; T is Unix milliseconds.
type lagSample struct {
	T       int64    `json:"t"`
	Bytes   *uint64  `json:"bytes"`
	Seconds *float64 `json:"seconds"`
}

type pageSlot struct {
	Active        bool   `json:"active"`
	WALStatus     string `json:"wal_status"`
	RetainedBytes int64  `json:"retained_wal_bytes"`
	OverLimit     bool   `json:"over_limit"`
	Unlimited     bool   `json:"wal_keep_unlimited"`
}

type pageError struct {
	Message string    `json:"message"`
	Kind    string    `json:"kind"` // clickhouse, postgres, slot_lost, other
	Time    time.Time `json:"time"`
	Stopped bool      `json:"stopped"` // it ended replication (else it was retried)
}

type pageTable struct {
	Table       string     `json:"table"` // schema.table
	Schema      string     `json:"schema"`
	Name        string     `json:"name"`
	Destination string     `json:"destination"`
	AppendOnly  bool       `json:"append_only"`
	Replicated  bool       `json:"replicated"` // false: renamed or dropped since
	Copy        *pageCopy  `json:"copy"`
	Streamed    pageOps    `json:"streamed"`
	LastApplied *time.Time `json:"last_applied"`
}

type pageCopy struct {
	Rows     uint64     `json:"rows"`
	Estimate uint64     `json:"estimate"` // PostgreSQL's reltuples; 0 unknown
	Done     bool       `json:"done"`
	Started  *time.Time `json:"started"`
	Finished *time.Time `json:"finished"`
	Copies   int        `json:"copies"` // copies of the table since ferry started
}

type pageOps struct {
	Insert   uint64 `json:"insert"`
	Update   uint64 `json:"update"`
	Delete   uint64 `json:"delete"`
	Truncate uint64 `json:"truncate"`
}

// newStatusPage describes ferry run's connections for the page, passwords
// redacted, and gathers the passwords it must never show.
func newStatusPage(o *observer, c *runCmd) *statusPage {
	p := &statusPage{o: o, info: pageInfo{Version: version, Started: time.Now(), Slot: c.Slot, Sink: c.Sink,
		Source: replicator.Redact(c.PG)}}
	if cfg, err := pgconn.ParseConfig(c.PG); err == nil {
		// The password from the URL, PGPASSWORD or ~/.pgpass.
		p.secrets = append(p.secrets, cfg.Password)
	}
	if c.Sink == "kafka" {
		p.info.Destination = "Kafka " + strings.Join(c.KafkaBrokers, ",") + ", topics " + c.TopicPrefix + ".*"
		p.secrets = append(p.secrets, c.SASLPassword)
		prefix := c.TopicPrefix
		p.topic = func(t replicator.ReplicatedTable) string { return kafka.TableTopic(prefix, t.Schema, t.Name) }
	} else {
		p.info.Destination = replicator.Redact(c.CH)
		if db, err := c.chDatabase(); err == nil {
			p.info.Destination += ", database " + db
		}
		p.secrets = append(p.secrets, c.chPassword, passwordInURL(c.CH))
	}
	return p
}

// scrub replaces every password the page knows of in s. The texts shown
// are redacted where they are made; this is the page's own guard.
func (p *statusPage) scrub(s string) string {
	for _, pw := range p.secrets {
		if pw != "" {
			s = strings.ReplaceAll(s, pw, "xxxxx")
		}
	}
	return s
}

// sample records the lag every lagSampleEvery until ctx is done.
func (p *statusPage) sample(ctx context.Context) {
	t := time.NewTicker(lagSampleEvery)
	defer t.Stop()
	for {
		lag := p.o.lag()
		s := lagSample{T: time.Now().UnixMilli(), Bytes: lag.Bytes, Seconds: lag.Seconds}
		p.mu.Lock()
		if len(p.history) == lagSamples {
			p.history = append(p.history[:0], p.history[1:]...)
		}
		p.history = append(p.history, s)
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *statusPage) status() pageStatus {
	st := p.o.pageState()
	st.pageInfo = p.info
	st.Source, st.Destination = p.scrub(st.Source), p.scrub(st.Destination)
	st.Now = time.Now()
	if st.LastError != nil {
		st.LastError.Message = p.scrub(st.LastError.Message)
	}
	st.Tables = p.o.book.snapshot()
	for i := range st.Tables {
		if p.topic != nil {
			st.Tables[i].Destination = p.topic(replicator.ReplicatedTable{Schema: st.Tables[i].Schema, Name: st.Tables[i].Name})
		}
		if st.State == "starting" && st.Tables[i].Copy != nil && !st.Tables[i].Copy.Done {
			st.State = "copying"
		}
	}
	p.mu.Lock()
	st.LagHistory = append([]lagSample(nil), p.history...)
	p.mu.Unlock()
	return st
}

// register adds the page's routes to mux.
func (p *statusPage) register(mux *http.ServeMux) {
	static := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			securityHeaders(w)
			http.ServeFileFS(w, r, statusFiles, "statuspage/"+name)
		}
	}
	mux.HandleFunc("GET /{$}", static("index.html"))
	mux.HandleFunc("GET /status.js", static("status.js"))
	mux.HandleFunc("GET /status.css", static("status.css"))
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, _ *http.Request) {
		securityHeaders(w)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(p.status())
	})
}

// securityHeaders keep the page to its own script and style: should a
// value ever reach the page as markup, the browser would run no script of
// it.
func securityHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
}

// passwordInURL is the password a URL carries, in its user part or as a
// password parameter; "" when none.
func passwordInURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if pw, ok := u.User.Password(); ok {
		return pw
	}
	return u.Query().Get("password")
}

// lag is ferry_lag_bytes and ferry_lag_seconds, each nil until the stream
// gave what it is computed from.
func (o *observer) lag() pageLag {
	o.mu.Lock()
	defer o.mu.Unlock()
	var l pageLag
	if o.serverWAL != 0 {
		b := uint64(0)
		if o.serverWAL > o.confirmed {
			b = uint64(o.serverWAL - o.confirmed)
		}
		l.Bytes = &b
		l.ServerLSN = o.serverWAL.String()
	}
	if !o.caughtUpTo.IsZero() {
		s := max(time.Since(o.caughtUpTo).Seconds(), 0)
		l.Seconds = &s
	}
	if o.confirmed != 0 {
		l.ConfirmedLSN = o.confirmed.String()
	}
	return l
}

// pageState is the observer's part of /status.json.
func (o *observer) pageState() pageStatus {
	lag := o.lag()
	o.mu.Lock()
	defer o.mu.Unlock()
	st := pageStatus{Lag: lag, Heartbeat: timePtr(o.heartbeat), Retries: o.retryCount, State: "starting"}
	if o.streaming {
		st.State = "streaming"
	}
	if h := o.health; h != nil {
		st.Slot = &pageSlot{Active: h.Active, WALStatus: h.WALStatus, RetainedBytes: h.RetainedBytes,
			OverLimit: h.OverLimit, Unlimited: h.Unlimited}
	}
	if o.lastErr != "" {
		st.LastError = &pageError{Message: o.lastErr, Kind: o.errKind, Time: o.errTime, Stopped: o.errStopped}
	}
	return st
}
