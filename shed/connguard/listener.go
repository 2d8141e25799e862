package connguard

import (
	"net"
	"sync/atomic"
)

// The states of a held connection, as ConnState reports them.
const (
	stateNew int32 = iota
	stateActive
	stateIdle
	stateHijacked
	stateEvicted // closed by the Guard to make room; final
)

// Listener returns ln behind the Guard: its Accept decides every connection
// ln accepts (see the package doc), answers and closes the refused ones
// itself, and returns the admitted ones, which leave the Guard's count when
// closed. Accept returns ln's errors. The listener is as safe for
// concurrent use as ln is; Close closes ln.
//
// With Respond, on Linux, a TCP ln is set to hand over a connection only
// once its first bytes arrived (TCP_DEFER_ACCEPT, for up to a second), so
// that a refused connection's request is there to read before the 503.
// This changes ln itself, for every server that accepts from it.
func (g *Guard) Listener(ln net.Listener) net.Listener {
	if g.refusal == Respond {
		deferAccept(ln)
	}
	return &listener{Listener: ln, g: g}
}

type listener struct {
	net.Listener
	g *Guard
}

// Accept waits for a connection the Guard admits; each one refused on the
// way is answered and closed here, in the accepting goroutine.
func (l *listener) Accept() (net.Conn, error) {
	g := l.g
	for { // once per connection ln accepts
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if g.shedNow() {
			g.ctr.shed.Add(1)
			g.refuse(nc)
			continue
		}
		c := &conn{Conn: nc, g: g}
		victim, ok := g.admit(c)
		if !ok {
			g.ctr.full.Add(1)
			g.refuse(nc)
			continue
		}
		if victim != nil {
			g.ctr.idleClosed.Add(1)
			_ = victim.Conn.Close() // its server goroutine sees the error and ends
		}
		g.ctr.accepted.Add(1)
		return c, nil
	}
}

// refuse answers a refused connection and closes it. Respond answers only
// a request that arrived already (see drain): waiting for one would cost
// the accept loop or a goroutine.
func (g *Guard) refuse(nc net.Conn) {
	if g.refusal == Respond {
		switch {
		case !drain(nc):
			g.ctr.unanswered.Add(1)
		case writeErr(nc.Write(g.resp)) != nil:
			g.ctr.writeErrors.Add(1)
		}
	}
	_ = nc.Close()
}

func writeErr(_ int, err error) error { return err }

// conn is a connection the Guard holds. The list fields are under the
// Guard's mu; state is ConnState's.
type conn struct {
	net.Conn
	g          *Guard
	state      atomic.Int32
	closed     atomic.Bool
	prev, next *conn
	held       bool
}

// setState records a state change unless the Guard evicted c already.
func (c *conn) setState(s int32) {
	for { // a CAS, so that an eviction is never overwritten
		old := c.state.Load()
		if old == stateEvicted || c.state.CompareAndSwap(old, s) {
			return
		}
	}
}

// Close closes the connection and, the first time, takes it out of the
// Guard's count.
func (c *conn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.g.release(c)
		c.g.ctr.closed.Add(1)
	}
	return err
}
