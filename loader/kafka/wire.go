package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
)

// kafka-go trusts the lengths a broker sends: a reply from a server that
// is not Kafka (a PostgreSQL, an HTTP or a TLS port given as a broker) is
// read as a size or an array length of a gigabyte or more, and kafka-go
// allocates it. Seen in the loader's tests: a leftover client dialled a
// port that a PostgreSQL proxy had taken over, and the test binary grew
// past 7 GiB in one allocation. So every plain connection to a broker
// checks the size of its first reply, which is always the answer to
// kafka-go's ApiVersions request (a few hundred bytes), and fails with an
// error that names the address instead.

// maxFirstReply bounds the first reply on a connection. An ApiVersions
// answer is under 2 KiB; the first bytes of other protocols' replies,
// read as a size, are tens of megabytes or more (PostgreSQL's 'E' or 'R'
// above a gigabyte, a ClickHouse exception 40 MB, a TLS alert 350 MB).
const maxFirstReply = 1 << 20

// notKafkaError: a broker address answered in another protocol.
type notKafkaError struct {
	addr  string
	size  uint32
	first [4]byte
}

func (e *notKafkaError) Error() string {
	return fmt.Sprintf("kafka: %s answered with something that is not Kafka (its first reply starts %q, %d bytes if it were Kafka's): "+
		"check --kafka-brokers (FERRY_KAFKA_BROKERS) names a Kafka listener, and --kafka-tls if that listener speaks TLS",
		e.addr, e.first[:], e.size)
}

// firstReplyConn checks the size of a connection's first reply as it is
// read, before kafka-go sees it.
type firstReplyConn struct {
	net.Conn
	head [4]byte
	got  int // bytes of head read; 4: checked
}

func (c *firstReplyConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.got < len(c.head) && n > 0 {
		c.got += copy(c.head[c.got:], p[:n])
		if c.got == len(c.head) {
			if size := binary.BigEndian.Uint32(c.head[:]); size > maxFirstReply {
				c.Conn.Close()
				return 0, &notKafkaError{addr: c.RemoteAddr().String(), size: size, first: c.head}
			}
		}
	}
	return n, err
}

// dial dials a broker; a plain connection checks its first reply. (Under
// TLS the first bytes are the handshake's, which fails by itself on a
// server that does not speak TLS.)
func (c Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := brokerDialer().DialContext(ctx, network, addr)
	if err != nil || c.TLS != nil {
		return conn, err
	}
	return &firstReplyConn{Conn: conn}, nil
}
