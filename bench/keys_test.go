package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// stepClock returns the same instant until advanced.
type stepClock struct{ t time.Time }

func (c *stepClock) now() time.Time { return c.t }

func newStepClock() *stepClock {
	return &stepClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
}

func TestUUIDVersionAndVariant(t *testing.T) {
	c := newStepClock()
	gens := map[string]struct {
		next    func() UUID
		version int
	}{
		"uuidv4":      {NewUUIDv4(1, 0).Next, 4},
		"uuidv7":      {NewUUIDv7(1, 0, c.now).Next, 7},
		"uuidv7-mono": {NewUUIDv7Mono(1, 0, c.now).Next, 7},
	}
	for name, g := range gens {
		t.Run(name, func(t *testing.T) {
			for i := 0; i < 10000; i++ {
				u := g.next()
				if u.Version() != g.version || !u.VariantOK() {
					t.Fatalf("key %d = %x: version %d, variant ok %v", i, u, u.Version(), u.VariantOK())
				}
				if i%100 == 0 {
					c.t = c.t.Add(time.Millisecond)
				}
			}
		})
	}
}

func TestUUIDv7Ordering(t *testing.T) {
	c := newStepClock()
	g := NewUUIDv7(7, 0, c.now)
	var prev UUID
	shuffled := false
	for ms := 0; ms < 50; ms++ {
		var inMs []UUID
		for i := 0; i < 20; i++ {
			inMs = append(inMs, g.Next())
		}
		if ms > 0 && bytes.Compare(inMs[0][:], prev[:]) <= 0 {
			t.Fatalf("ms %d: first key %x not after previous millisecond's last %x", ms, inMs[0], prev)
		}
		for i := 1; i < len(inMs); i++ {
			if bytes.Compare(inMs[i][:], inMs[i-1][:]) < 0 {
				shuffled = true
			}
			if inMs[i].Millis() != c.t.UnixMilli() {
				t.Fatalf("timestamp %d, want %d", inMs[i].Millis(), c.t.UnixMilli())
			}
		}
		// prev is the largest of this millisecond's keys.
		prev = inMs[0]
		for _, u := range inMs {
			if bytes.Compare(u[:], prev[:]) > 0 {
				prev = u
			}
		}
		c.t = c.t.Add(time.Millisecond)
	}
	if !shuffled {
		t.Fatal("keys within a millisecond were always ascending: rand_a/rand_b are not random")
	}
}

func TestUUIDv7MonoStrictlyIncreasing(t *testing.T) {
	c := newStepClock()
	g := NewUUIDv7Mono(3, 0, c.now)
	prev := g.Next()
	for i := 1; i < 20000; i++ {
		if i%7 == 0 {
			c.t = c.t.Add(time.Millisecond)
		}
		if i%1000 == 0 {
			c.t = c.t.Add(-5 * time.Millisecond) // a clock that steps back
		}
		u := g.Next()
		if bytes.Compare(u[:], prev[:]) <= 0 {
			t.Fatalf("key %d %x not after %x", i, u, prev)
		}
		prev = u
	}
}

func TestUUIDv7MonoCarryAt4096(t *testing.T) {
	c := newStepClock()
	g := NewUUIDv7Mono(5, 0, c.now)
	ms := c.t.UnixMilli()
	var last UUID
	for i := 0; i < counterLimit; i++ {
		u := g.Next()
		if u.Millis() != ms {
			t.Fatalf("key %d: ms %d, want %d", i, u.Millis(), ms)
		}
		if got := int(u[6]&0x0F)<<8 | int(u[7]); got != i {
			t.Fatalf("key %d: counter %d", i, got)
		}
		last = u
	}
	if last[6]>>4 != 7 || last[6]&0x0F != 0x0F || last[7] != 0xFF {
		t.Fatalf("counter 4095 = %x: version nibble or counter wrong", last[6:8])
	}
	carried := g.Next()
	if carried.Millis() != ms+1 || carried[6] != 0x70 || carried[7] != 0 {
		t.Fatalf("4097th key %x: want ms+1 with counter 0 and version 7", carried)
	}
	if bytes.Compare(carried[:], last[:]) <= 0 || !carried.VariantOK() {
		t.Fatalf("carried key %x not after %x, or variant broken", carried, last)
	}
	// The wall clock catching up to the borrowed millisecond continues the
	// counter rather than restarting it below the carried key.
	c.t = c.t.Add(time.Millisecond)
	if u := g.Next(); bytes.Compare(u[:], carried[:]) <= 0 {
		t.Fatalf("key after the clock caught up %x not after %x", u, carried)
	}
}

func TestSnowflake(t *testing.T) {
	c := newStepClock()
	g := NewSnowflake(37, c.now)
	first := g.Next()
	if w := first >> 12 & 1023; w != 37 {
		t.Fatalf("worker bits %d", w)
	}
	if ms := first >> 22; ms != c.t.UnixMilli()-SnowflakeEpoch.UnixMilli() {
		t.Fatalf("time bits %d", ms)
	}
	prev := first
	for i := 1; i < 3*counterLimit; i++ {
		k := g.Next()
		if k <= prev {
			t.Fatalf("key %d %d not after %d", i, k, prev)
		}
		prev = k
	}
	if ms := prev >> 22; ms != c.t.UnixMilli()-SnowflakeEpoch.UnixMilli()+2 {
		t.Fatalf("after 3×4096 keys in one ms, time bits %d: want two carries", ms)
	}
	other := NewSnowflake(38, c.now).Next()
	if other>>22 != first>>22 || other <= first {
		t.Fatalf("worker 38 %d should sort after worker 37 %d in the same ms", other, first)
	}
}

func TestDeterministicFromSeed(t *testing.T) {
	c := newStepClock()
	for name, mk := range map[string]func(seed, stream uint64) func() UUID{
		"uuidv4":      func(s, st uint64) func() UUID { return NewUUIDv4(s, st).Next },
		"uuidv7":      func(s, st uint64) func() UUID { return NewUUIDv7(s, st, c.now).Next },
		"uuidv7-mono": func(s, st uint64) func() UUID { return NewUUIDv7Mono(s, st, c.now).Next },
	} {
		t.Run(name, func(t *testing.T) {
			a, b, other, otherStream := mk(42, 1), mk(42, 1), mk(43, 1), mk(42, 2)
			same, diffSeed, diffStream := true, false, false
			for i := 0; i < 1000; i++ {
				x := a()
				same = same && x == b()
				diffSeed = diffSeed || x != other()
				diffStream = diffStream || x != otherStream()
			}
			if !same || !diffSeed || !diffStream {
				t.Fatalf("same seed equal %v, other seed differs %v, other stream differs %v", same, diffSeed, diffStream)
			}
		})
	}
}

// TestRunsShareKeyStreams builds two runs' loads as entry does and
// requires the same keys, with milliseconds from the synthetic clock
// rather than the wall clock.
func TestRunsShareKeyStreams(t *testing.T) {
	b := &bencher{cfg: Config{ConnString: "x"}.withDefaults()}
	for _, name := range []string{"uuidv4", "uuidv7", "uuidv7-mono", "snowflake"} {
		s, _ := strategyByName(name)
		keys := func() []any {
			l := b.spec(s, "insert", 2, 0)
			gen := s.generator(l.seed, l.stream0+1, l.clock)
			out := make([]any, 100)
			for i := range out {
				out[i] = gen.next()
			}
			return out
		}
		a, c := keys(), keys()
		for i := range a {
			if a[i] != c[i] {
				t.Fatalf("%s: key %d differs between two runs: %v vs %v", name, i, a[i], c[i])
			}
		}
		if name == "uuidv7" {
			u := UUID(a[99].(pgtype.UUID).Bytes)
			if want := ClockStart.UnixMilli() + 99/int64(b.cfg.KeysPerMillisecond); u.Millis() != want {
				t.Errorf("uuidv7 key 99 at %d ms, want %d (the synthetic clock)", u.Millis(), want)
			}
		}
	}
}
