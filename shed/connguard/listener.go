package connguard

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
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
// With WithBacklog, on Linux, a TCP ln's accept queue is shortened
// (listen(2) again). On Linux, a TCP ln gets the kernel's receive
// timestamps (SO_TIMESTAMPNS), which its connections inherit: see
// ConnContext. These change ln itself, for every server that accepts
// from it.
//
// With WithPause, Accept waits without accepting while the pacing keeps
// the listener closed (see the package doc); Close ends such a wait. When
// ln has a SetDeadline method (TCP and Unix listeners do), the pacing uses
// it to end an Accept at the end of an open part: it owns ln's deadline.
func (g *Guard) Listener(ln net.Listener) net.Listener {
	if g.refusal == Respond {
		deferAccept(ln)
	}
	if g.backlog > 0 {
		setBacklog(ln, g.backlog)
	}
	stamped := stampArrivals(ln)
	return &listener{Listener: ln, g: g, made: time.Now(), done: make(chan struct{}), stamped: stamped}
}

type listener struct {
	net.Listener
	g *Guard
	// made is when the listener was made: the pacing periods count from it.
	made time.Time
	// done is closed by Close, to end a pause.
	done      chan struct{}
	closeOnce sync.Once
	// stamped says that ln's connections inherit its receive timestamps.
	stamped bool
}

// Close closes ln and ends a pause of Accept.
func (l *listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Accept waits for a connection the Guard admits; each one refused on the
// way is answered and closed here, in the accepting goroutine. With
// WithPause it first waits out the closed part of the pacing period.
func (l *listener) Accept() (net.Conn, error) {
	g := l.g
	for { // once per connection ln accepts
		var nc net.Conn
		var err error
		if g.period > 0 {
			nc, err = l.acceptPaced()
		} else {
			nc, err = l.Listener.Accept()
		}
		if err != nil {
			return nil, err
		}
		if g.period == 0 && g.shedNow() {
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
		c.arr = timeArrivals(nc, l.stamped) // before the server has c: no other goroutine reads it yet
		c.early.Store(g.waits != nil && c.arr != nil)
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
	// arr times the arrival of what is read, where the system can; nil
	// elsewhere.
	arr *arrivals
	// early says that the Guard may answer requests on c
	// (WithEarlyAnswer, with arrival times): cleared for good when c turns
	// out not to speak HTTP/1.1. tracked says that the Guard's ConnState
	// has seen c, and readFor is how far the latest read deadline the
	// server set was when it set it, ns (0: none).
	early, tracked atomic.Bool
	readFor        atomic.Int64
	// used is the Guard's served count when c last finished a request
	// (see Guard.victim).
	used atomic.Uint64
}

// finished notes that c finished a request just now: it is the most
// recently used of the Guard's connections.
func (c *conn) finished() { c.used.Store(c.g.served.Add(1)) }

// Read reads from the connection, noting when the bytes reached the host
// where the system tells (see Guard.ConnContext).
func (c *conn) Read(p []byte) (int, error) {
	switch {
	case c.arr == nil:
		return c.Conn.Read(p)
	case len(p) == netHTTPBuffer && c.early.Load() && c.between():
		return c.readEarly(p)
	}
	return c.arr.read(p)
}

// LastArrival returns when the latest bytes read from the connection
// reached the host, in Unix nanoseconds, and false when that is not known
// (before the first read, or where the system does not tell): c is a
// shed.ArrivalSource.
func (c *conn) LastArrival() (int64, bool) {
	if c.arr == nil {
		return 0, false
	}
	at := c.arr.lastArrival()
	return at, at != 0
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
		c.g.nudge()
	}
	return err
}
