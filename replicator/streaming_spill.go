package replicator

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// spills holds the streamed transactions that have neither committed nor
// aborted yet, by top-level xid. It is used by the stream's goroutine only.
type spills struct {
	dir  string
	open map[uint32]*spill
	cur  *spill // the transaction whose chunk is being received, between Stream Start and Stream Stop
}

func newSpills(dir string) *spills {
	if dir == "" {
		dir = os.TempDir()
	}
	return &spills{dir: dir, open: map[uint32]*spill{}}
}

// start returns the spill of transaction xid, creating it for the first
// chunk.
func (ss *spills) start(xid uint32) (*spill, error) {
	if sp := ss.open[xid]; sp != nil {
		return sp, nil
	}
	sp, err := newSpill(ss.dir, xid)
	if err != nil {
		return nil, err
	}
	ss.open[xid] = sp
	return sp, nil
}

// take removes transaction xid's spill from the set and returns it; nil
// when none is open.
func (ss *spills) take(xid uint32) *spill {
	sp := ss.open[xid]
	delete(ss.open, xid)
	if ss.cur == sp {
		ss.cur = nil
	}
	return sp
}

// closeAll drops every open spill: PostgreSQL streams these transactions
// again, from their first change, on the next connection.
func (ss *spills) closeAll() {
	for xid, sp := range ss.open {
		sp.close()
		delete(ss.open, xid)
	}
	ss.cur = nil
}

// spill is one streamed transaction's changes, in the order they came, in
// a temporary file. The file is unlinked as soon as it is created, so it
// vanishes with the process however that ends, and a crash leaves nothing
// behind to clean up.
//
// Each record is the change's WAL position (8 bytes), the xid of the
// (sub)transaction that made it (4), the message's length (4) and the
// message in protocol version 1 form: without the xid that protocol 2 puts
// after the type byte.
type spill struct {
	xid     uint32
	f       *os.File
	w       *bufio.Writer
	changes int
	bytes   int64
	aborted map[uint32]bool // subtransactions rolled back
}

const spillHeader = 16

func newSpill(dir string, xid uint32) (*spill, error) {
	f, err := os.CreateTemp(dir, fmt.Sprintf("ferry-txn-%d-*", xid))
	if err != nil {
		return nil, fmt.Errorf("spill streamed transaction %d: %w: set --spill-dir (replicator.Config.SpillDir) to a writable directory with room for the largest transaction", xid, err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("spill streamed transaction %d: unlink %s: %w", xid, f.Name(), err)
	}
	return &spill{xid: xid, f: f, w: bufio.NewWriterSize(f, 256<<10), aborted: map[uint32]bool{}}, nil
}

// add appends a change: typ is the message's type byte and body what
// follows the xid.
func (sp *spill) add(lsn uint64, xid uint32, typ byte, body []byte) error {
	if len(body)+1 > 1<<32-1 {
		return fmt.Errorf("streamed transaction %d: a message of %d bytes", sp.xid, len(body))
	}
	var h [spillHeader]byte
	binary.BigEndian.PutUint64(h[0:], lsn)
	binary.BigEndian.PutUint32(h[8:], xid)
	binary.BigEndian.PutUint32(h[12:], uint32(len(body)+1))
	if _, err := sp.w.Write(h[:]); err != nil {
		return sp.writeErr(err)
	}
	if err := sp.w.WriteByte(typ); err != nil {
		return sp.writeErr(err)
	}
	if _, err := sp.w.Write(body); err != nil {
		return sp.writeErr(err)
	}
	sp.changes++
	sp.bytes += int64(spillHeader + 1 + len(body))
	return nil
}

func (sp *spill) writeErr(err error) error {
	return fmt.Errorf("spill streamed transaction %d (%d bytes so far) to %s: %w: give --spill-dir more room", sp.xid, sp.bytes, sp.f.Name(), err)
}

// abort forgets the changes of a rolled-back subtransaction; replay skips
// them. PostgreSQL reports each aborted subtransaction, nested ones too.
//
// Relation and Type messages are replayed all the same: pgoutput describes
// a table once per streamed transaction, in whichever subtransaction first
// touches it, and does not describe it again after that subtransaction
// rolls back, unless the rollback undid a change of the table's shape (its
// cache invalidation then makes pgoutput describe the table anew before
// its next change).
func (sp *spill) abort(subxid uint32) { sp.aborted[subxid] = true }

// replay calls fn for every change not rolled back, in order. The message
// passed to fn is only valid during the call.
func (sp *spill) replay(fn func(lsn uint64, msg []byte) error) error {
	if err := sp.w.Flush(); err != nil {
		return sp.writeErr(err)
	}
	if _, err := sp.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("replay streamed transaction %d: %w", sp.xid, err)
	}
	r := bufio.NewReaderSize(sp.f, 256<<10)
	var buf []byte
	var h [spillHeader]byte
	for {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("replay streamed transaction %d: %w", sp.xid, err)
		}
		n := int(binary.BigEndian.Uint32(h[12:]))
		if n > cap(buf) {
			buf = make([]byte, n)
		}
		msg := buf[:n]
		if _, err := io.ReadFull(r, msg); err != nil {
			return fmt.Errorf("replay streamed transaction %d: %w", sp.xid, err)
		}
		if sp.aborted[binary.BigEndian.Uint32(h[8:])] && msg[0] != 'R' && msg[0] != 'Y' {
			continue
		}
		if err := fn(binary.BigEndian.Uint64(h[0:]), msg); err != nil {
			return err
		}
		if cap(buf) > 1<<20 {
			buf = nil // a huge value's buffer is not kept for the small ones after it
		}
	}
}

func (sp *spill) close() { sp.f.Close() }
