package streamshed_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
)

// TestNetConnCloseGivesThePermitBack: closing the wrapped connection ends
// the Conn, once.
func TestNetConnCloseGivesThePermitBack(t *testing.T) {
	g, c := newGuard(t, nil)
	conn, _, err := g.Open(context.Background(), alice())
	if err != nil || conn == nil {
		t.Fatal(err)
	}
	server, client := net.Pipe()
	defer client.Close()
	nc := conn.NetConn(server)
	if n := inflight(c); n != 1 {
		t.Fatalf("inflight %d while open", n)
	}
	if err := nc.Close(); err != nil {
		t.Fatal(err)
	}
	_ = nc.Close()
	if s := c.Stats(); s.Inflight != 0 || s.DoubleDone != 0 {
		t.Fatalf("after Close: inflight %d, double done %d", s.Inflight, s.DoubleDone)
	}
}

// TestNetConnIsClosedWhenTheConnEnds: a message over the limit, or the
// context's end, closes the raw connection: its peer reads EOF, nothing is
// left half open.
func TestNetConnIsClosedWhenTheConnEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, c := newGuard(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		conn, _, err := g.Open(ctx, alice())
		if err != nil || conn == nil {
			t.Fatal(err)
		}
		server, client := net.Pipe()
		defer client.Close()
		nc := conn.NetConn(server)
		defer nc.Close()
		cancel()
		synctest.Wait()
		if _, err := client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("peer read %v, want EOF", err)
		}
		if n := inflight(c); n != 0 {
			t.Fatalf("inflight %d after the context ended", n)
		}
	})
}
