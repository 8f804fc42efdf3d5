package replicator

import (
	"net"
	"time"
)

// streamClock is the time as the stream's loop reads it. Reading the clock
// costs ~50 ns here, and the loop read it twice per message (for its
// deadlines and its pace): 7 % of the CPU of a catch-up of 100-row
// transactions. Between two reads of the socket the loop takes messages
// from its read buffer, microseconds apart, so a reading stays good until
// the socket is read again (the read may have waited) or clockUses
// readings were taken from it; a flush, or anything else that may take
// long, forgets it (moved).
type streamClock struct {
	fills func() uint64 // how many times the socket was read; nil: read the clock every time
	seen  uint64        // fills at the last reading
	t     time.Time     // the last reading; zero when forgotten
	uses  int           // times t was returned
}

// clockUses bounds how many times one reading is used: with two per
// message, 32 messages, tens of microseconds of work apart.
const clockUses = 64

// watch makes the clock read again after every read of conn's socket,
// when conn counts them; otherwise it reads the clock every time.
func (c *streamClock) watch(conn net.Conn) {
	c.fills, c.t = nil, time.Time{}
	if f, ok := conn.(interface{ Fills() uint64 }); ok {
		c.fills = f.Fills
	}
}

// now returns the time, read again when it may have moved on.
func (c *streamClock) now() time.Time {
	if c.fills == nil {
		return time.Now()
	}
	if f := c.fills(); f != c.seen || c.uses >= clockUses || c.t.IsZero() {
		c.t, c.seen, c.uses = time.Now(), f, 0
	}
	c.uses++
	return c.t
}

// moved forgets the last reading: the next now reads the clock.
func (c *streamClock) moved() { c.t = time.Time{} }
