package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap"
	zapobs "go.uber.org/zap/zaptest/observer"
)

// TestCopyProgressLogs: off a terminal the copy logs rows, rate and ETA.
func TestCopyProgressLogs(t *testing.T) {
	core, logs := zapobs.New(zap.InfoLevel)
	p := &copyProgress{log: zap.New(core)}
	p.update("public.a", 0, 1000, false)
	p.update("public.a", 500, 1000, false)
	p.update("public.a", 1000, 1000, true)
	got := logs.FilterMessage("copying").All()
	if len(got) != 1 {
		t.Fatalf("%d copying lines, want 1 (the start and the end are not logged here): %v", len(got), got)
	}
	f := got[0].ContextMap()
	if f["table"] != "public.a" || f["rows"] != uint64(500) || f["estimated_rows"] != uint64(1000) || f["eta"] == nil {
		t.Errorf("copying line: %v", f)
	}
}

// TestCopyProgressBar draws a bar per table on a terminal.
func TestCopyProgressBar(t *testing.T) {
	var out bytes.Buffer
	p := &copyProgress{log: zap.NewNop(), out: &out}
	p.update("public.a", 0, 100, false)
	p.update("public.a", 100, 100, true)
	p.update("public.b", 0, 0, false)
	p.update("public.b", 42, 0, true)
	for _, want := range []string{"public.a", "100/100", "public.b", "42"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bar output lacks %q: %q", want, out.String())
		}
	}
}
