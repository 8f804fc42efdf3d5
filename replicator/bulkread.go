package replicator

import (
	"time"

	"go.uber.org/zap"

	"github.com/ferry-cdc/ferry/internal/netdial"
)

// Reading in bulk. The walsender sends each message as it decodes it, so a
// stream that keeps up with a backlog finds one message on the socket per
// read, and waking in the poller and reading once per message was two
// thirds of ferry's CPU in a catch-up of single-row transactions. While
// messages keep arriving (bulkMsgs or more in the last bulkWindow), the
// stream asks the kernel to wake its read only once bulkBytes have arrived
// (SO_RCVLOWAT), and bounds every wait by bulkWait: a read then takes
// whatever arrived, many messages, at most bulkWait after the first. A
// wait that ends with nothing arrived is the stream gone quiet (see idle),
// as a wait of quietWait is otherwise. When the pace drops below bulkMsgs
// a window, it reads per message again, so a trickle or an idle stream
// waits for nothing. Only on Linux.
const (
	bulkWindow = 10 * time.Millisecond
	bulkMsgs   = 20
	bulkBytes  = 64 << 10
	bulkWait   = 2 * time.Millisecond
)

// bulkRead is the stream's pace: messages counted per window, and whether
// the connection's low-water mark is raised.
type bulkRead struct {
	on     bool
	broken bool // setting the mark failed once: reads stay per message
	start  time.Time
	msgs   int
}

// pace starts a new window when the last one is over and raises or lowers
// the low-water mark by its count. It returns whether reads are in bulk.
func (s *stream) pace(now time.Time) bool {
	b := &s.bulk
	if now.Sub(b.start) < bulkWindow {
		return b.on
	}
	want := b.msgs >= bulkMsgs && !b.broken
	b.start, b.msgs = now, 0
	if want != b.on {
		s.setBulk(want)
	}
	return b.on
}

// bulkPending reports whether bytes have arrived that a wait in bulk did
// not wake for.
func (s *stream) bulkPending() bool {
	n, err := netdial.Queued(s.conn.Conn())
	return err == nil && n > 0
}

// setBulk raises (on) or lowers the connection's low-water mark.
func (s *stream) setBulk(on bool) {
	mark := 1
	if on {
		mark = bulkBytes
	}
	if err := netdial.SetRecvLowWater(s.conn.Conn(), mark); err != nil {
		if on {
			s.log.Debug("reading the replication connection per message", zap.Error(err))
		}
		s.bulk.broken, s.bulk.on = true, false
		return
	}
	s.bulk.on = on
}
