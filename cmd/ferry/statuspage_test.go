package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// oddTable is a table name with a quote, markup, an ampersand and
// non-ASCII letters: the page must show it as text.
const oddTable = `we"ird <b>tab</b> & ünï`

// TestStatusPage runs ferry with two tables (one oddly named), writes
// rows, has PostgreSQL end ferry's replication connection (a retried
// error), and loads the status page in headless Chromium: the page must
// show each table's name as text, the rows copied and streamed as
// written, when changes were last applied, the lag with its chart, and
// the error, and no password. FERRY_STATUS_SCREENSHOT=path also keeps a
// light load going for a while and takes a screenshot there (how
// docs/status-page.png is made).
func TestStatusPage(t *testing.T) {
	chromium(t)
	e := newOpsEnv(t)
	odd := `"` + strings.ReplaceAll(oddTable, `"`, `""`) + `"`
	e.exec("CREATE TABLE items (id int PRIMARY KEY, v text)",
		"INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 300) g",
		"CREATE TABLE "+odd+" (id int PRIMARY KEY)",
		"INSERT INTO "+odd+" SELECT generate_series(1, 40)",
		"ANALYZE items", "ANALYZE "+odd) // so that the copy's estimates are exact
	addr := freeAddr(t)
	stop := e.start(e.args("run", "--metrics-addr", addr, "--heartbeat", "300ms")...)
	waitReady(t, addr)

	e.exec("INSERT INTO items SELECT g, 'w' FROM generate_series(1001, 1050) g",
		"UPDATE items SET v = 'u' WHERE id <= 10",
		"DELETE FROM items WHERE id BETWEEN 291 AND 295",
		"INSERT INTO "+odd+" SELECT generate_series(101, 107)")
	// Everything written is confirmed before the connection is ended, so
	// the stream sends no change twice and the counts stay exact.
	e.waitConfirmed()
	e.adminExec(fmt.Sprintf("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '%s' AND active", e.name))
	testkit.WaitFor(t, 2*time.Minute, "ferry to stream again after PostgreSQL ended its connection", func() bool {
		st, ok := pageJSON(addr)
		return ok && st.LastError != nil && st.Slot != nil && st.Slot.Active && e.slotActive()
	})
	e.exec("INSERT INTO " + odd + " SELECT generate_series(201, 203)")
	testkit.WaitFor(t, 2*time.Minute, "the page's data to have every change applied", func() bool {
		st, ok := pageJSON(addr)
		if !ok || len(st.Tables) != 2 || st.Lag.Bytes == nil || st.Lag.Seconds == nil {
			return false
		}
		points := 0
		for _, s := range st.LagHistory {
			if s.Bytes != nil && s.Seconds != nil {
				points++
			}
		}
		if points < 2 { // a chart needs two
			return false
		}
		for _, tb := range st.Tables {
			if tb.LastApplied == nil || tb.Streamed.Insert == 0 {
				return false
			}
		}
		return st.Tables[1].Streamed.Insert == 10 // the odd table's, sorted after "public.items"
	})

	page := parseDOM(t, headless(t, "http://"+addr+"/", "--dump-dom"))
	checkStatusPage(t, e, page)

	if shot := os.Getenv("FERRY_STATUS_SCREENSHOT"); shot != "" {
		e.lightLoad(odd, 90*time.Second)
		abs, err := filepath.Abs(shot)
		if err != nil {
			t.Fatal(err)
		}
		headless(t, "http://"+addr+"/", "--hide-scrollbars", "--window-size=1280,860", "--screenshot="+abs)
		t.Logf("screenshot in %s", abs)
	}
	out, err := stop()
	if err != nil {
		t.Fatalf("ferry run: %v\n%s", err, out)
	}
}

// checkStatusPage asserts on what the page shows after TestStatusPage's
// writes.
func checkStatusPage(t *testing.T, e *opsEnv, page *domNode) {
	t.Helper()
	text := func(id string) string {
		n := page.byID(id)
		if n == nil {
			t.Fatalf("the page has no #%s", id)
		}
		return strings.TrimSpace(n.textContent())
	}
	if got := text("state"); got != "streaming" {
		t.Errorf("state %q, want streaming", got)
	}
	if got := text("slot"); got != e.name {
		t.Errorf("slot %q, want %q", got, e.name)
	}
	if got := text("source"); !strings.Contains(got, "xxxxx") || !strings.Contains(got, "/"+e.name) {
		t.Errorf("source %q: want the PostgreSQL URL with its password redacted", got)
	}
	if got := text("destination"); !strings.Contains(got, "database "+e.name) {
		t.Errorf("destination %q: want the ClickHouse database %s", got, e.name)
	}
	for _, id := range []string{"lag-seconds", "lag-bytes"} {
		if got := text(id); got == "" || got == "–" || !strings.ContainsAny(got, "0123456789") {
			t.Errorf("#%s shows %q, want a lag", id, got)
		}
	}
	for _, id := range []string{"chart-seconds", "chart-bytes"} {
		lines := page.byID(id).all("series")
		if len(lines) != 1 || strings.Count(lines[0].attrs["points"], ",") < 2 {
			t.Errorf("#%s draws %d series, want one line of at least 2 points: %+v", id, len(lines), lines)
		}
	}
	if got := text("confirmed-lsn"); !strings.Contains(got, "/") {
		t.Errorf("confirmed LSN %q", got)
	}

	if page.byID("error").hidden() || !page.byID("no-error").hidden() {
		t.Errorf("the last error is hidden")
	}
	if got := text("error-message"); !strings.Contains(got, "terminating connection") {
		t.Errorf("last error %q, want PostgreSQL's terminating connection", got)
	}
	if got := text("error-kind"); got != "postgres, retried" {
		t.Errorf("error kind %q, want postgres, retried", got)
	}

	rows := page.byID("tables").all("table-row")
	if len(rows) != 2 {
		t.Fatalf("%d table rows, want 2: %q", len(rows), page.byID("tables").textContent())
	}
	type want struct {
		name                 string
		copied, estimate     int
		ins, upd, del, trunc int
		destination          string
	}
	for i, w := range []want{
		{name: "public.items", destination: "items", copied: 300, estimate: 300, ins: 50, upd: 10, del: 5},
		{name: "public." + oddTable, destination: oddTable, copied: 40, estimate: 40, ins: 10},
	} {
		r := rows[i]
		name := r.one(t, "name")
		if got := name.textContent(); got != w.name {
			t.Errorf("row %d: name %q, want %q", i, got, w.name)
		}
		for _, c := range name.children {
			if c.tag != "" {
				t.Errorf("row %d: the name cell holds a <%s> element: a name became markup", i, c.tag)
			}
		}
		if got := r.one(t, "dest").textContent(); got != w.destination {
			t.Errorf("%s: destination %q, want %q", w.name, got, w.destination)
		}
		for cls, n := range map[string]int{"copy-rows": w.copied, "copy-est": w.estimate,
			"ins": w.ins, "upd": w.upd, "del": w.del, "trunc": w.trunc} {
			if got := number(t, r.one(t, cls).textContent()); got != n {
				t.Errorf("%s: %s shows %d, want %d", w.name, cls, got, n)
			}
		}
		if got := r.one(t, "copy-state").textContent(); got != "done" {
			t.Errorf("%s: copy state %q, want done", w.name, got)
		}
		if got := r.one(t, "applied").textContent(); !strings.HasSuffix(got, " ago") {
			t.Errorf("%s: last change applied %q, want a time", w.name, got)
		}
	}
	if strings.Contains(page.textContent(), testPassword) {
		t.Errorf("the page shows the password")
	}
	if got := text("updated"); !strings.HasPrefix(got, "updated ") {
		t.Errorf("#updated %q: the script did not render", got)
	}
}

// number reads a count the page shows with thousands separators.
func number(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(s), ",", ""))
	if err != nil {
		t.Errorf("%q is not a count", s)
	}
	return n
}

func waitReady(t *testing.T, addr string) {
	t.Helper()
	testkit.WaitFor(t, 2*time.Minute, "/readyz", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// pageJSON reads /status.json; ok is false while ferry does not answer.
func pageJSON(addr string) (pageStatus, bool) {
	var st pageStatus
	resp, err := http.Get("http://" + addr + "/status.json")
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	return st, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil
}

// waitConfirmed waits until the slot's confirmed position (as PostgreSQL
// has it) passes everything written so far.
func (e *opsEnv) waitConfirmed() {
	e.t.Helper()
	var target string
	if err := e.admin.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&target); err != nil {
		e.t.Fatal(err)
	}
	testkit.WaitFor(e.t, 2*time.Minute, "the slot to confirm "+target, func() bool {
		var ok bool
		err := e.admin.QueryRow(context.Background(),
			"SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1", e.name, target).Scan(&ok)
		return err == nil && ok
	})
}

func (e *opsEnv) slotActive() bool {
	var active bool
	err := e.admin.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", e.name).Scan(&active)
	return err == nil && active
}

// lightLoad writes a few rows a second, in bursts, for d: for a
// screenshot whose lag chart has a shape.
func (e *opsEnv) lightLoad(odd string, d time.Duration) {
	e.t.Helper()
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		n := 20 + (i%7)*150
		e.exec(fmt.Sprintf("INSERT INTO items SELECT g, repeat('x', 200) FROM generate_series(%d, %d) g", 10000+i*2000, 10000+i*2000+n),
			fmt.Sprintf("UPDATE items SET v = 'u%d' WHERE id %% 97 = %d", i, i%97),
			fmt.Sprintf("INSERT INTO %s VALUES (%d)", odd, 1000+i))
		time.Sleep(time.Duration(300+(i%5)*200) * time.Millisecond)
	}
}
