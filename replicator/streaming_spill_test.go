package replicator

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// TestSpillReplay checks that a spill gives back its changes in order, in
// protocol 1 form, without those of aborted subtransactions but with their
// Relation messages, and that its file is gone from the directory.
func TestSpillReplay(t *testing.T) {
	dir := t.TempDir()
	sp, err := newSpill(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the spill file is visible in its directory: %v", left)
	}
	huge := bytes.Repeat([]byte{'x'}, 3<<20) // larger than the replay's kept buffer
	adds := []struct {
		lsn  uint64
		xid  uint32
		typ  byte
		body []byte
	}{
		{100, 10, 'R', []byte("rel")},
		{110, 10, 'I', []byte("top-1")},
		{120, 11, 'R', []byte("rel-in-sub")},
		{130, 11, 'I', []byte("sub-aborted")},
		{140, 12, 'U', huge},
		{150, 13, 'D', []byte("nested-aborted")},
		{160, 10, 'I', nil},
	}
	for _, a := range adds {
		if err := sp.add(a.lsn, a.xid, a.typ, a.body); err != nil {
			t.Fatal(err)
		}
	}
	sp.abort(11)
	sp.abort(13)
	var got []string
	err = sp.replay(func(lsn uint64, msg []byte) error {
		got = append(got, fmt.Sprintf("%d %c %d", lsn, msg[0], len(msg)-1))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"100 R 3", "110 I 5", "120 R 10", fmt.Sprintf("140 U %d", len(huge)), "160 I 0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("replay:\n got  %v\n want %v", got, want)
	}
	if sp.changes != len(adds) {
		t.Errorf("changes = %d, want %d", sp.changes, len(adds))
	}
}

// TestSpillReplayError stops the replay at the first error.
func TestSpillReplayError(t *testing.T) {
	sp, err := newSpill(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	for i := uint64(0); i < 3; i++ {
		if err := sp.add(i, 1, 'I', []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	err = sp.replay(func(uint64, []byte) error {
		calls++
		return fmt.Errorf("boom")
	})
	if err == nil || calls != 1 {
		t.Errorf("replay returned %v after %d calls, want boom after 1", err, calls)
	}
}

// TestSpillDirMissing names the setting to fix.
func TestSpillDirMissing(t *testing.T) {
	_, err := newSpill(t.TempDir()+"/missing", 7)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("--spill-dir")) {
		t.Errorf("got %v, want an error naming --spill-dir", err)
	}
}

// TestParseStreamControl turns malformed stream messages into errors.
func TestParseStreamControl(t *testing.T) {
	for _, data := range [][]byte{{'S'}, {'S', 0, 0}, {'c', 0, 0, 0, 1}, {'A', 0, 0, 0, 1, 0}} {
		if _, err := parseStreamControl(data); err == nil {
			t.Errorf("%q: no error", data)
		}
	}
	msg, err := parseStreamControl([]byte{'A', 0, 0, 0, 5, 0, 0, 0, 6})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%+v", msg); !bytes.Contains([]byte(got), []byte("Xid:5 SubXid:6")) {
		t.Errorf("parsed %s", got)
	}
}
