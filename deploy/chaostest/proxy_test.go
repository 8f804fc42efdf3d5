package chaostest

import (
	"net"
	"sync"
	"time"
)

// proxy forwards TCP connections from a loopback port to a target, and
// can cut every connection, stall them (stop forwarding, keep them open)
// or throttle them to a number of bytes per second in each direction.
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[net.Conn]bool
	stalled bool
	resume  chan struct{} // closed when a stall ends
	rate    int           // bytes/s per direction; 0 = unlimited
	closed  bool
}

func startProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}, resume: make(chan struct{})}
	go p.accept()
	return p, nil
}

// addr is the proxy's host:port.
func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *proxy) serve(client net.Conn) {
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
	go func() { p.pump(server, client); closeBoth() }()
	go func() { p.pump(client, server); closeBoth() }()
}

// track registers a connection pair, unless the proxy is closed.
func (p *proxy) track(a, b net.Conn) bool {
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

// pump copies src to dst, obeying stalls and the rate.
func (p *proxy) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		p.gate()
		chunk := len(buf)
		if r := p.currentRate(); r > 0 {
			chunk = max(1, min(chunk, r/10)) // about ten writes a second
		}
		n, err := src.Read(buf[:chunk])
		if n > 0 {
			p.gate()
			if r := p.currentRate(); r > 0 {
				time.Sleep(time.Duration(n) * time.Second / time.Duration(r))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: serve closes both sides
		}
	}
}

// gate blocks while the proxy is stalled.
func (p *proxy) gate() {
	for {
		p.mu.Lock()
		stalled, resume := p.stalled, p.resume
		p.mu.Unlock()
		if !stalled {
			return
		}
		<-resume
	}
}

func (p *proxy) currentRate() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rate
}

// drop closes every open connection; new ones are still accepted.
func (p *proxy) drop() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns) / 2
	for c := range p.conns {
		c.Close()
	}
	return n
}

// stall stops forwarding until unstall.
func (p *proxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
}

func (p *proxy) unstall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		close(p.resume)
		p.resume = make(chan struct{})
	}
}

// throttle limits each direction of each connection to bytesPerSec; 0
// lifts the limit.
func (p *proxy) throttle(bytesPerSec int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = bytesPerSec
}

// reset returns to plain forwarding.
func (p *proxy) reset() {
	p.unstall()
	p.throttle(0)
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.unstall()
	p.drop()
}
