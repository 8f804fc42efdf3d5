package bench

import (
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Clock tells the time; generators take one so that tests can step it.
type Clock func() time.Time

// ClockStart is where the synthetic clock starts: the seed's keys lie in
// the minutes before it, every run's load keys after it.
var ClockStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newTickClock returns a clock that steps 1 ms every perMs calls, counted
// across every caller: the keys of all clients of a run share its
// milliseconds as they share the wall clock's, at a rate that is the same
// on every machine.
func newTickClock(start time.Time, perMs int) Clock {
	var n atomic.Int64
	return func() time.Time {
		return start.Add(time.Duration((n.Add(1)-1)/int64(perMs)) * time.Millisecond)
	}
}

// streamSeed derives the ChaCha8 seed of one key stream (one client, or the
// seeding pass) from the run's recorded seed, so every stream is fixed by
// (seed, stream) alone.
func streamSeed(seed uint64, stream uint64) [32]byte {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[0:8], seed)
	binary.LittleEndian.PutUint64(s[8:16], stream)
	binary.LittleEndian.PutUint64(s[16:24], 0x66657272792d6b65) // "ferry-ke"
	return s
}

func newRand(seed, stream uint64) *rand.Rand {
	s := streamSeed(seed, stream)
	return rand.New(rand.NewChaCha8(s))
}

// UUID is a UUID's 16 bytes in network order.
type UUID [16]byte

// Version is the version nibble (bits 48–51).
func (u UUID) Version() int { return int(u[6] >> 4) }

// VariantOK reports whether the variant bits are RFC 9562's 10xx.
func (u UUID) VariantOK() bool { return u[8]&0xC0 == 0x80 }

// Millis is the 48-bit Unix millisecond timestamp of a version 7 UUID.
func (u UUID) Millis() int64 {
	var b [8]byte
	copy(b[2:], u[0:6])
	return int64(binary.BigEndian.Uint64(b[:]))
}

func setVersionVariant(u *UUID, version byte) {
	u[6] = u[6]&0x0F | version<<4
	u[8] = u[8]&0x3F | 0x80
}

func fillRandom(r *rand.Rand, b []byte) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, r.Uint64())
		b = b[8:]
	}
	if len(b) > 0 {
		var t [8]byte
		binary.LittleEndian.PutUint64(t[:], r.Uint64())
		copy(b, t[:])
	}
}

func putMillis(u *UUID, ms int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(ms))
	copy(u[0:6], b[2:8])
}

// UUIDv4 makes random (version 4) UUIDs.
type UUIDv4 struct{ r *rand.Rand }

// NewUUIDv4 returns the generator of stream `stream` of seed `seed`.
func NewUUIDv4(seed, stream uint64) *UUIDv4 { return &UUIDv4{r: newRand(seed, stream)} }

// Next returns the next UUID.
func (g *UUIDv4) Next() UUID {
	var u UUID
	fillRandom(g.r, u[:])
	setVersionVariant(&u, 4)
	return u
}

// UUIDv7 makes version 7 UUIDs whose 74 bits after the millisecond
// timestamp are random: ordered across milliseconds, shuffled within one.
type UUIDv7 struct {
	r     *rand.Rand
	clock Clock
}

// NewUUIDv7 returns the generator of stream `stream` of seed `seed`.
func NewUUIDv7(seed, stream uint64, clock Clock) *UUIDv7 {
	return &UUIDv7{r: newRand(seed, stream), clock: clock}
}

// Next returns the next UUID.
func (g *UUIDv7) Next() UUID {
	var u UUID
	fillRandom(g.r, u[6:])
	putMillis(&u, g.clock().UnixMilli())
	setVersionVariant(&u, 7)
	return u
}

// counterLimit is where a 12-bit counter runs out.
const counterLimit = 1 << 12

// monoClock is the millisecond-plus-counter state that uuidv7-mono and
// snowflake share: a new millisecond restarts the counter at 0, and a
// counter that reaches 4096 carries into the next millisecond, which the
// generator then uses even though the wall clock has not reached it yet.
// A clock that steps back is ignored, so values never decrease.
type monoClock struct {
	clock   Clock
	ms      int64
	counter int
	started bool
}

func (m *monoClock) next() (ms int64, counter int) {
	now := m.clock().UnixMilli()
	switch {
	case !m.started || now > m.ms:
		m.ms, m.counter, m.started = now, 0, true
	default:
		m.counter++
		if m.counter == counterLimit {
			m.ms++
			m.counter = 0
		}
	}
	return m.ms, m.counter
}

// UUIDv7Mono makes version 7 UUIDs that increase strictly within one
// generator: a 12-bit counter in rand_a (the and seed 002's
// "method 2"; RFC 9562 §6.2 lists a dedicated counter as its Method 1),
// random rand_b.
type UUIDv7Mono struct {
	r  *rand.Rand
	mc monoClock
}

// NewUUIDv7Mono returns the generator of stream `stream` of seed `seed`.
func NewUUIDv7Mono(seed, stream uint64, clock Clock) *UUIDv7Mono {
	return &UUIDv7Mono{r: newRand(seed, stream), mc: monoClock{clock: clock}}
}

// Next returns the next UUID.
func (g *UUIDv7Mono) Next() UUID {
	var u UUID
	ms, counter := g.mc.next()
	fillRandom(g.r, u[8:])
	putMillis(&u, ms)
	// rand_a is the low 12 bits of bytes 6–7; the version nibble above it
	// is written last and the counter never exceeds 12 bits.
	u[6] = byte(counter >> 8 & 0x0F)
	u[7] = byte(counter)
	setVersionVariant(&u, 7)
	return u
}

// SnowflakeEpoch is the custom epoch snowflake keys count from.
var SnowflakeEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// Snowflake makes 64-bit keys: 41 bits of milliseconds since
// SnowflakeEpoch, 10 bits of worker, 12 bits of sequence. Each load client
// is one worker.
type Snowflake struct {
	worker int64
	mc     monoClock
}

// NewSnowflake returns a generator for worker (taken modulo 1024).
func NewSnowflake(worker int, clock Clock) *Snowflake {
	return &Snowflake{worker: int64(worker % 1024), mc: monoClock{clock: clock}}
}

// Next returns the next key.
func (g *Snowflake) Next() int64 {
	ms, seq := g.mc.next()
	return (ms-SnowflakeEpoch.UnixMilli())<<22 | g.worker<<12 | int64(seq)
}
