package replicator

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// copyBinarySignature starts COPY's binary format, before a 4-byte flags
// field and a 4-byte header extension length.
var copyBinarySignature = []byte("PGCOPY\n\xff\r\n\x00")

// copyBinaryReader splits COPY TO STDOUT binary-format output into rows
// and fields, as copyReader does the text format: each row is a 16-bit
// field count and each field a 32-bit length (-1 for NULL) and its bytes;
// a count of -1 ends the data. PostgreSQL sends a row a message, so a row
// is normally read where pgconn wrote it; one split between Writes is put
// together in partial.
type copyBinaryReader struct {
	row     func(fields [][]byte) error
	header  bool     // the file header was read
	done    bool     // the trailer was read
	partial []byte   // the start of a row (or header) left from the last Write
	fields  [][]byte // reused between rows
}

func (c *copyBinaryReader) Write(p []byte) (int, error) {
	n := len(p)
	for len(c.partial) > 0 && len(p) > 0 {
		// Take from p only what the split row still lacks (at least its
		// next length field), so that p's own rows are read where they are.
		need, complete, err := c.next(c.partial)
		if err != nil {
			return 0, err
		}
		if complete {
			break
		}
		take := min(need-len(c.partial), len(p))
		c.partial = append(c.partial, p[:take]...)
		p = p[take:]
	}
	if len(c.partial) > 0 {
		need, complete, err := c.next(c.partial)
		if err != nil {
			return 0, err
		}
		if !complete {
			return n, nil // p was used up
		}
		if err := c.consume(c.partial[:need]); err != nil {
			return 0, err
		}
		c.partial = c.partial[:0]
	}
	for len(p) > 0 {
		need, complete, err := c.next(p)
		if err != nil {
			return 0, err
		}
		if !complete {
			c.partial = append(c.partial, p...)
			break
		}
		if err := c.consume(p[:need]); err != nil {
			return 0, err
		}
		p = p[need:]
	}
	return n, nil
}

// next measures the header, row or trailer that b starts with: its length
// when b holds all of it (complete), else how many bytes b must hold at
// least to tell more.
func (c *copyBinaryReader) next(b []byte) (need int, complete bool, err error) {
	if c.done {
		return 0, false, fmt.Errorf("copy: data after the end of the binary copy")
	}
	if !c.header {
		const fixed = 11 + 4 + 4
		if len(b) < fixed {
			return fixed, false, nil
		}
		if !bytes.Equal(b[:11], copyBinarySignature) {
			return 0, false, fmt.Errorf("copy: not COPY's binary format")
		}
		need = fixed + int(binary.BigEndian.Uint32(b[15:]))
		return need, len(b) >= need, nil
	}
	if len(b) < 2 {
		return 2, false, nil
	}
	count := int(int16(binary.BigEndian.Uint16(b)))
	if count == -1 {
		return 2, true, nil
	}
	if count < 0 {
		return 0, false, fmt.Errorf("copy: row of %d fields", count)
	}
	at := 2
	for range count {
		if len(b) < at+4 {
			return at + 4, false, nil
		}
		size := int(int32(binary.BigEndian.Uint32(b[at:])))
		at += 4
		if size > 0 {
			at += size
		} else if size < -1 {
			return 0, false, fmt.Errorf("copy: field of %d bytes", size)
		}
	}
	return at, len(b) >= at, nil
}

// consume reads one complete header, row or trailer.
func (c *copyBinaryReader) consume(b []byte) error {
	if !c.header {
		// Bit 16 says each row carries an OID; bits 0-15 are reserved for
		// changes a reader must understand; the others may be ignored.
		if flags := binary.BigEndian.Uint32(b[11:]); flags&(1<<16|0xffff) != 0 {
			return fmt.Errorf("copy: binary header flags %#x (OIDs or an unknown format change)", flags)
		}
		c.header = true
		return nil
	}
	count := int(int16(binary.BigEndian.Uint16(b)))
	if count == -1 {
		c.done = true
		return nil
	}
	c.fields = c.fields[:0]
	at := 2
	for range count {
		size := int(int32(binary.BigEndian.Uint32(b[at:])))
		at += 4
		if size < 0 {
			c.fields = append(c.fields, nil)
			continue
		}
		c.fields = append(c.fields, b[at:at+size:at+size]) // not nil, even when empty
		at += size
	}
	return c.row(c.fields)
}

// Close reports a copy that ended without its trailer.
func (c *copyBinaryReader) Close() error {
	if len(c.partial) > 0 || !c.done {
		return fmt.Errorf("copy: binary stream ended inside a row")
	}
	return nil
}
