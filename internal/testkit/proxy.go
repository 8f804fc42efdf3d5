package testkit

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections from a loopback port to a target, and
// can cut every connection, stall them (stop forwarding, keep them open),
// hold the ones open now for good (a network that drops their packets),
// or throttle them to a number of bytes per second in each direction.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[net.Conn]bool
	stalled bool
	resume  chan struct{} // closed when a stall ends
	rate    int           // bytes/s per direction; 0 = unlimited
	upRate  int           // bytes/s from clients to the target; 0 = unlimited
	closed  bool
	done    chan struct{} // closed by Close
	epoch   int           // connections accepted before the current epoch are held

	forwarded atomic.Int64 // bytes from clients to the target
}

// StartProxy listens on a free loopback port and forwards to target.
func StartProxy(target string) (*Proxy, error) { return StartProxyOn("127.0.0.1", target) }

// StartProxyOn is StartProxy on a free port of host, such as 127.0.0.2
// for a name the target's certificate lacks.
func StartProxyOn(host, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}, resume: make(chan struct{}), done: make(chan struct{})}
	go p.accept(ln)
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ln.Addr().String()
}

func (p *Proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		epoch := p.epoch
		p.mu.Unlock()
		go p.serve(c, epoch)
	}
}

func (p *Proxy) serve(client net.Conn, epoch int) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			client.Close()
			server.Close()
			p.mu.Lock()
			delete(p.conns, client)
			delete(p.conns, server)
			p.mu.Unlock()
		})
	}
	go func() { p.pump(server, client, true, epoch); closeBoth() }()
	go func() { p.pump(client, server, false, epoch); closeBoth() }()
}

// track registers a connection pair, unless the proxy is closed.
func (p *Proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		a.Close()
		b.Close()
		return false
	}
	p.conns[a], p.conns[b] = true, true
	return true
}

// pump copies src to dst, obeying stalls, holds and the rates; up is the
// direction from the client to the target, epoch the connection's.
func (p *Proxy) pump(dst, src net.Conn, up bool, epoch int) {
	buf := make([]byte, 32<<10)
	for {
		p.gate(epoch)
		chunk := len(buf)
		if r := p.currentRate(up); r > 0 {
			chunk = max(1, min(chunk, r/10)) // about ten writes a second
		}
		n, err := src.Read(buf[:chunk])
		if n > 0 {
			p.gate(epoch)
			if r := p.currentRate(up); r > 0 {
				time.Sleep(time.Duration(n) * time.Second / time.Duration(r))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if up {
				p.forwarded.Add(int64(n))
			}
		}
		if err != nil {
			return // EOF or a closed connection: serve closes both sides
		}
	}
}

// gate blocks while the proxy is stalled, and until Close for a
// connection that is held.
func (p *Proxy) gate(epoch int) {
	for {
		p.mu.Lock()
		stalled, resume, held := p.stalled, p.resume, epoch < p.epoch
		p.mu.Unlock()
		switch {
		case held:
			<-p.done
			return
		case stalled:
			<-resume
		default:
			return
		}
	}
}

func (p *Proxy) currentRate(up bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if up && p.upRate > 0 && (p.rate == 0 || p.upRate < p.rate) {
		return p.upRate
	}
	return p.rate
}

// Drop closes every open connection; new ones are still accepted.
func (p *Proxy) Drop() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns) / 2
	for c := range p.conns {
		c.Close()
	}
	return n
}

// Stall stops forwarding until unstall.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
}

// Hold silences for good every connection open now: they stay open but
// carry nothing either way, as behind a network that drops their packets
// without resetting anything. Connections made later are forwarded.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epoch++
}

// Unstall forwards again after Stall.
func (p *Proxy) Unstall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		close(p.resume)
		p.resume = make(chan struct{})
	}
}

// Throttle limits each direction of each connection to bytesPerSec; 0
// lifts the limit.
func (p *Proxy) Throttle(bytesPerSec int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = bytesPerSec
}

// ThrottleUp limits only what clients send the target (an insert's data,
// say) to bytesPerSec; 0 lifts the limit.
func (p *Proxy) ThrottleUp(bytesPerSec int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upRate = bytesPerSec
}

// Reset returns to plain forwarding.
func (p *Proxy) Reset() {
	p.Unstall()
	p.Throttle(0)
	p.ThrottleUp(0)
}

// Refuse stops listening and cuts every connection: new ones are refused,
// as by a server that is down, until Listen.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	ln := p.ln
	p.mu.Unlock()
	ln.Close()
	p.Drop()
}

// Listen accepts connections again on the same address after Refuse.
func (p *Proxy) Listen() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ln, err := net.Listen("tcp", p.ln.Addr().String())
	if err != nil {
		return err
	}
	p.ln = ln
	go p.accept(ln)
	return nil
}

// Forwarded is how many bytes clients sent to the target so far.
func (p *Proxy) Forwarded() int64 { return p.forwarded.Load() }

// Close stops listening and cuts every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		close(p.done)
	}
	p.closed = true
	ln := p.ln
	p.mu.Unlock()
	ln.Close()
	p.Unstall()
	p.Drop()
}
