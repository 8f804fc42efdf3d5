package replicator

import (
	"bytes"
	"testing"
)

func TestCopyReader(t *testing.T) {
	var got [][]string
	c := &copyReader{row: func(fields [][]byte) error {
		var r []string
		for _, f := range fields {
			if f == nil {
				r = append(r, "<NULL>")
			} else {
				r = append(r, string(f))
			}
		}
		got = append(got, r)
		return nil
	}}
	stream := "1\ta\\tb\\\\c\t\\N\n2\t\t\\n\\r\\b\\f\\v\n3\t\\101\\x42\\0\tq\n"
	// Feed it in awkward pieces to exercise partial lines.
	for _, piece := range []string{stream[:3], stream[3:11], stream[11:12], stream[12:]} {
		if _, err := c.Write([]byte(piece)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"1", "a\tb\\c", "<NULL>"},
		{"2", "", "\n\r\b\f\v"},
		{"3", "AB\x00", "q"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("row %d: got %q want %q", i, got[i], want[i])
		}
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Errorf("row %d field %d: got %q want %q", i, j, got[i][j], want[i][j])
			}
		}
	}
}

func TestCopyReaderUnterminated(t *testing.T) {
	c := &copyReader{row: func([][]byte) error { return nil }}
	if _, err := c.Write([]byte("1\t2")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err == nil {
		t.Fatal("want an error for a row without its newline")
	}
}

func TestUnescapeEmptyNotNil(t *testing.T) {
	out, err := unescapeCopy(nil, []byte{})
	if err != nil || out == nil || !bytes.Equal(out, []byte{}) {
		t.Fatalf("got %v %v", out, err)
	}
}
