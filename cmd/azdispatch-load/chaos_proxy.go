package main

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// hangProxy forwards TCP connections to the emulator, except that while
// hanging is on it keeps some new connections open without forwarding or
// answering anything: a connection that accepts and never answers, as a
// half-dead load balancer or a stuck service node does. A request sent on
// one waits until the client gives up on it (the SDK's Retry.TryTimeout),
// and reaches no service, so only time is lost. The decision is made per
// connection, because HTTP keeps connections open: a client that reuses
// its idle connections meets a hang only when it opens a new one.
type hangProxy struct {
	ln     net.Listener
	target string
	rng    *lockedRand
	rate   float64 // of new connections, while on

	on    atomic.Bool
	hangs atomic.Int64

	wg     sync.WaitGroup // the accept loop and every connection's handler
	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open client and emulator connections, closed by close
	closed bool
}

// startHangProxy listens on a free loopback port and forwards to target
// (host:port), hanging a share rate of new connections while on.
func startHangProxy(target string, rng *lockedRand, rate float64) (*hangProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &hangProxy{ln: ln, target: target, rng: rng, rate: rate, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return p, nil
}

// addr is where clients connect.
func (p *hangProxy) addr() string { return p.ln.Addr().String() }

// setHanging turns hanging of new connections on or off; connections
// hanging already stay so until their clients give up.
func (p *hangProxy) setHanging(on bool) { p.on.Store(on) }

func (p *hangProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Go(func() { p.handle(c) })
	}
}

// track registers c for close; false once the proxy is closing.
func (p *hangProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *hangProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *hangProxy) handle(c net.Conn) {
	defer p.untrack(c)
	if p.on.Load() && p.rng.chance(p.rate) {
		p.hangs.Add(1)
		// Read what the client sends so that it never blocks writing,
		// answer nothing, and let go when it closes.
		_, _ = io.Copy(io.Discard, c)
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	var copies sync.WaitGroup
	// Whichever side finishes first ends the connection for both.
	copies.Go(func() { _, _ = io.Copy(up, c); up.Close(); c.Close() })
	copies.Go(func() { _, _ = io.Copy(c, up); up.Close(); c.Close() })
	copies.Wait()
}

// close stops accepting, cuts every connection and waits for the handlers.
func (p *hangProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
