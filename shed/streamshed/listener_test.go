package streamshed_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestListenerClosesARefusedConnectionAndHandsOutTheAdmitted: the per-IP
// rate rule admits three connections a minute from 127.0.0.1; the fourth
// is closed before Accept returns (its client reads EOF), the admitted
// ones hold their permits until they are closed.
func TestListenerClosesARefusedConnectionAndHandsOutTheAdmitted(t *testing.T) {
	clk := newFrozen()
	g, c := newGuard(t, clk.Now)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := g.Listener(raw, nil)
	accepted := make(chan net.Conn)
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			nc, err := ln.Accept()
			if err != nil {
				return // ln closed
			}
			accepted <- nc
		}
	}()
	var clients, servers []net.Conn
	defer func() {
		for _, nc := range append(clients, servers...) {
			nc.Close()
		}
	}()
	for range 3 {
		cl, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
		servers = append(servers, <-accepted)
	}
	if n := inflight(c); n != 3 {
		t.Fatalf("inflight %d with three admitted", n)
	}
	refused, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	_ = refused.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound, not a timing assertion
	if _, err := refused.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the fourth connection read %v, want EOF (closed by the listener)", err)
	}
	servers[0].Close()
	if n := inflight(c); n != 2 {
		t.Fatalf("inflight %d after one closed", n)
	}
	raw.Close()
	<-served
	for _, nc := range servers {
		nc.Close()
	}
	if s := c.Stats(); s.Inflight != 0 || s.DoubleDone != 0 {
		t.Fatalf("at the end: inflight %d, double done %d", s.Inflight, s.DoubleDone)
	}
}
