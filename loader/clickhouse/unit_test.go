package clickhouse

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
)

func TestIsRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&proto.Exception{Code: 252, Message: "Too many parts"}, true},
		{&proto.Exception{Code: 241, Message: "Memory limit exceeded"}, true},
		{classify(&proto.Exception{Code: 279, Message: "All connection tries failed"}), true},
		{classify(&proto.Exception{Code: 32, Message: "Attempt to read after eof: while receiving packet from 127.0.0.1:40520"}), true},
		{fmt.Errorf("insert: %w", &proto.Exception{Code: 27, Message: "Cannot parse input"}), false},
		{classify(&proto.Exception{Code: 53, Message: "Type mismatch"}), false},
		{fmt.Errorf("x: %w", syscall.ECONNREFUSED), true},
		{fmt.Errorf("x: %w", syscall.ECONNRESET), true},
		{io.EOF, true},
		{reject(io.EOF), false},
		{errors.New("converting string to Int32 is unsupported"), false},
	} {
		if got := IsRetryable(c.err); got != c.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestRedact(t *testing.T) {
	r := newRedactor("clickhouse://u:p%40ss-w0rd@h:9000/db?x_password=k3y&compress=lz4")
	if d := r.dsn(); strings.Contains(d, "ss-w0rd") || strings.Contains(d, "k3y") || !strings.Contains(d, "h:9000") {
		t.Errorf("dsn() = %s", d)
	}
	err := r.wrap(errors.New("auth failed for p@ss-w0rd"), "connect to %s", "h")
	if strings.Contains(err.Error(), "ss-w0rd") || !errors.Is(err, errors.Unwrap(errors.Unwrap(err))) {
		t.Errorf("wrap = %v", err)
	}
}

func TestInsertQuery(t *testing.T) {
	got := insertQuery("INSERT INTO `d`.`a(b` (`x)`, `y\\`(`, `z`)")
	want := "INSERT INTO\n`d`.`a\\x28b` (`x\\x29`, `y\\`\\x28`, `z`)"
	if got != want {
		t.Errorf("insertQuery = %q, want %q", got, want)
	}
}

func TestNormType(t *testing.T) {
	if normType("Nullable(Decimal(10, 2))") != normType("Nullable(Decimal(10,2))") {
		t.Error("spaces matter")
	}
	if normType("Enum8('a b' = 1)") == normType("Enum8('ab' = 1)") {
		t.Error("spaces in quotes dropped")
	}
}

func TestValue(t *testing.T) {
	b, s := true, "x"
	pb, ps := &b, &s
	var nilF *float32
	for _, c := range []struct {
		dest, want any
	}{
		{&ps, "x"}, {&pb, true}, {&nilF, nil}, {new(uint32), uint32(0)}, {&[]*int32{nil}, []*int32{nil}},
	} {
		got, err := value(c.dest)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", c.want) {
			t.Errorf("value(%T) = %#v, %v; want %#v", c.dest, got, err, c.want)
		}
	}
}

func TestClusterSettingsProblem(t *testing.T) {
	for _, c := range []struct {
		set  map[string]string
		want string // a part of the error, "" for none
	}{
		// 18.16 with ferry's setting, with and without a quorum: it has no insert_quorum_parallel.
		{map[string]string{"insert_distributed_sync": "1", "insert_quorum": "0"}, ""},
		{map[string]string{"insert_distributed_sync": "1", "insert_quorum": "2"}, ""},
		// 26.7's defaults with ferry's setting.
		{map[string]string{"insert_distributed_sync": "1", "distributed_foreground_insert": "1", "insert_quorum": "0", "insert_quorum_parallel": "1"}, ""},
		{map[string]string{"insert_distributed_sync": "1", "insert_quorum": "auto", "insert_quorum_parallel": "1"}, ""},
		{map[string]string{"insert_distributed_sync": "1", "insert_quorum": "auto", "insert_quorum_parallel": "0"}, "#97557"},
		{map[string]string{"insert_distributed_sync": "1", "insert_quorum": "2", "insert_quorum_parallel": "0"}, "insert_quorum = 2"},
		{map[string]string{"insert_distributed_sync": "0"}, "insert_distributed_sync is 0"},
		{map[string]string{"insert_distributed_sync": "1", "distributed_foreground_insert": "0"}, "distributed_foreground_insert is 0"},
	} {
		err := clusterSettingsProblem("c", c.set)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v, want none", c.set, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v, want an error with %q", c.set, err, c.want)
		}
	}
}
