// Command shield relays ClickHouse's native protocol to the libchdb-hosted
// server of the local stack and keeps the ends of connections orderly.
//
// clickhouse-local inside libchdb serves the native protocol, but an
// exception that escapes one of its connection threads ends the whole
// process: a client that resets its connection (a SIGKILLed ferry, a test
// proxy that cuts a link) takes the server down with it. Between the two,
// shield turns every end of a client connection, reset or not, into a
// half-close towards the server, and reads what the server still sends until
// the server closes, so the server only ever sees a client that said goodbye.
//
// A failed login ends the process the same way, so shield also reads each
// connection's Hello packet and answers a user or password that is not in
// its -user list with the server's own AUTHENTICATION_FAILED exception,
// without passing the connection on.
//
//	shield -listen 127.0.0.1:29000 -upstream 127.0.0.1:29001 -user default= -user ferry_secret=...
package main

import (
	"bufio"
	"errors"
	"flag"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"time"
)

// users maps the server's users to their passwords.
type users map[string]string

func (u users) String() string { return strings.Join(keys(u), ",") }

func (u users) Set(v string) error {
	name, password, ok := strings.Cut(v, "=")
	if !ok {
		return errors.New("want name=password")
	}
	u[name] = password
	return nil
}

func keys(m users) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

var known = users{}

func main() {
	listen := flag.String("listen", "127.0.0.1:29000", "address clients connect to")
	upstream := flag.String("upstream", "127.0.0.1:29001", "the server's own native-protocol address")
	flag.Var(known, "user", "name=password of a user the server has (repeat); none: every login passes")
	flag.Parse()
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("shield: %v", err)
	}
	log.Printf("shield: %s -> %s", *listen, *upstream)
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				os.Exit(0)
			}
			log.Printf("shield: accept: %v", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go relay(c.(*net.TCPConn), *upstream)
	}
}

// relay copies both ways. The client's end, whatever its cause, becomes a
// FIN to the server; the server's replies are drained until it closes, so
// it neither reads a reset nor writes into a closed socket.
func relay(client *net.TCPConn, upstream string) {
	defer client.Close()
	in := bufio.NewReaderSize(client, 1<<17)
	// Anything but a Hello first (a TLS ClientHello, 0x16, from a client
	// told to use TLS on this plain port) also ends the process there.
	if first, err := in.Peek(1); err != nil || first[0] != 0 {
		return
	}
	if user, password, ok := readHello(in); ok && len(known) > 0 {
		if want, found := known[user]; !found || want != password {
			_, _ = client.Write(authFailed(user))
			_ = client.CloseWrite()
			_, _ = io.Copy(io.Discard, client)
			return
		}
	}
	c, err := net.DialTimeout("tcp", upstream, 10*time.Second)
	if err != nil {
		return // the server is down or restarting: the client sees a closed connection
	}
	server := c.(*net.TCPConn)
	defer server.Close()
	go func() {
		_, _ = io.Copy(server, in)
		_ = server.CloseWrite()
	}()
	if _, err := io.Copy(client, server); err != nil {
		// The client is gone: keep reading until the server is done.
		_ = server.SetReadDeadline(time.Now().Add(10 * time.Minute))
		_, _ = io.Copy(io.Discard, server)
	}
	_ = client.CloseWrite()
}

// readHello peeks at the client's Hello packet (type 0): client name,
// three version numbers, database, user, password. It consumes nothing:
// the packet still goes to the server as it came.
func readHello(in *bufio.Reader) (user, password string, ok bool) {
	var off int
	uvarint := func() (uint64, bool) {
		var v uint64
		for shift := uint(0); shift < 64; shift += 7 {
			b, err := in.Peek(off + 1)
			if err != nil {
				return 0, false
			}
			c := b[off]
			off++
			v |= uint64(c&0x7f) << shift
			if c < 0x80 {
				return v, true
			}
		}
		return 0, false
	}
	str := func() (string, bool) {
		n, ok := uvarint()
		if !ok || n > 1<<16 {
			return "", false
		}
		b, err := in.Peek(off + int(n))
		if err != nil {
			return "", false
		}
		s := string(b[off : off+int(n)])
		off += int(n)
		return s, true
	}
	if t, ok := uvarint(); !ok || t != 0 {
		return "", "", false
	}
	if _, ok := str(); !ok { // client name
		return "", "", false
	}
	for i := 0; i < 3; i++ { // major, minor, protocol revision
		if _, ok := uvarint(); !ok {
			return "", "", false
		}
	}
	if _, ok := str(); !ok { // database
		return "", "", false
	}
	if user, ok = str(); !ok {
		return "", "", false
	}
	if password, ok = str(); !ok {
		return "", "", false
	}
	return user, password, true
}

// authFailed is the server's Exception packet for a failed login.
func authFailed(user string) []byte {
	b := []byte{2}            // packet type Exception
	b = append(b, 4, 2, 0, 0) // code 516, little-endian Int32
	put := func(s string) {
		n := len(s)
		for n >= 0x80 {
			b = append(b, byte(n)|0x80)
			n >>= 7
		}
		b = append(b, byte(n))
		b = append(b, s...)
	}
	put("DB::Exception")
	put(user + ": Authentication failed: password is incorrect, or there is no user with such name")
	put("")
	return append(b, 0) // no nested exception
}
