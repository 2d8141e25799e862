package redisstore_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy is a TCP proxy on the loopback that delays every chunk of bytes by
// delay in each direction, in order: a cross-region link. cut drops every
// connection and refuses new ones until heal.
type proxy struct {
	t      testing.TB
	l      net.Listener
	target string
	delay  time.Duration

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
	wg    sync.WaitGroup
}

// startProxy starts a proxy to target, closed at the end of the test.
func startProxy(t testing.TB, target string, delay time.Duration) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, l: l, target: target, delay: delay}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = l.Close()
		p.partition()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(c, up) })
		p.wg.Go(func() { p.pipe(up, c) })
	}
}

// chunk is bytes read at one instant.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies from src to dst, each chunk delay after it was read.
func (p *proxy) pipe(src, dst net.Conn) {
	ch := make(chan chunk, 1024)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer dst.Close()
		for c := range ch {
			if wait := time.Until(c.at.Add(p.delay)); wait > 0 {
				<-time.After(wait)
			}
			if _, err := dst.Write(c.b); err != nil {
				for range ch { // drain until the reader stops
				}
				return
			}
		}
	})
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			ch <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now()}
		}
		if err != nil {
			if err != io.EOF {
				_ = src.Close()
			}
			break
		}
	}
	close(ch)
	wg.Wait()
}

// partition drops every connection through the proxy and refuses new ones.
func (p *proxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// heal lets connections through again.
func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}
