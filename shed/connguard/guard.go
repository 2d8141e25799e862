package connguard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/shed"
)

// Unbounded is the bound of a Guard that never refuses a connection for
// their number, only for shedding.
const Unbounded = math.MaxInt

// DefaultRetryAfter is the Retry-After of the 503 a refused connection
// gets unless WithRetryAfter says otherwise.
const DefaultRetryAfter = time.Second

// Signal tells the Guard which share of new connections to refuse now, in
// [0, 1]. *shed.Controller is one (Controller.Shedding). Shedding must be
// safe for concurrent use and cheap: it runs once per accepted connection.
type Signal interface {
	Shedding() float64
}

// Refusal is how a Guard answers a connection it refuses.
type Refusal int

const (
	// Respond writes a pre-written HTTP/1.1 503 with Retry-After and
	// Connection: close, then closes the connection.
	Respond Refusal = iota
	// Close closes the connection at once, without a word.
	Close
)

// Guard bounds the connections of an http.Server and refuses new ones while
// its Signal sheds (see the package doc). Its settings are immutable and it
// is safe for concurrent use; it starts no goroutine. Use New; the zero
// value is not usable.
type Guard struct {
	sig     Signal
	max     int
	refusal Refusal
	resp    []byte // the 503, written whole on a refused connection

	// conns picks the connections refused at accept, idle those closed
	// as they go idle (WithIdleShed).
	conns, idle spreader

	// period is the pacing period of WithPause, zero without it; backlog
	// the accept queue of WithBacklog, zero without it; idleShed is
	// WithIdleShed.
	period   time.Duration
	backlog  int
	idleShed bool
	// waits is the Signal as a WaitShedder with WithEarlyAnswer, nil
	// without it; answers are the early answers then.
	waits   WaitShedder
	answers earlyAnswers
	// earlyWrite bounds the write of an early answer (earlyWriteTimeout).
	earlyWrite time.Duration
	// waiting counts the Accept calls that wait in a pause, pausedAt is
	// the share (float64 bits) the latest pause began at, forRoom whether
	// it waits for room at the bound, and wake ends one of those waits
	// early (see nudge).
	waiting  atomic.Int32
	pausedAt atomic.Uint64
	forRoom  atomic.Bool
	wake     chan struct{}

	// mu guards the list of held connections, oldest first, and its
	// length; it is taken once at accept and once at close, never per
	// request.
	mu         sync.Mutex
	head, tail *conn
	n          int
	// served counts the requests the Guard's connections finished (one
	// atomic add as each goes idle): a connection's count from it says
	// how recently it was in use (see victim).
	served atomic.Uint64

	ctr counters
}

// Option configures New.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	refusal     Refusal
	retryAfter  time.Duration
	period      time.Duration
	backlog     int
	idleShed    bool
	earlyAnswer bool
}

// WithRefusal chooses how a refused connection is answered (Respond
// otherwise).
func WithRefusal(r Refusal) Option {
	return optionFunc(func(c *config) error {
		if r != Respond && r != Close {
			return fmt.Errorf("connguard: unknown Refusal %d", r)
		}
		c.refusal = r
		return nil
	})
}

// WithRetryAfter sets the Retry-After of the 503 that Respond writes,
// rounded up to whole seconds (DefaultRetryAfter otherwise). A d that is
// not positive is an error.
func WithRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("connguard: Retry-After %v is not positive", d)
		}
		c.retryAfter = d
		return nil
	})
}

// MaxPausePeriod is the longest pacing period WithPause takes: a listener
// closed for longer than this is a listener that does not serve.
const MaxPausePeriod = time.Second

// WithPause makes the Guard pace its listener instead of refusing
// connections while the Signal sheds: for the share f the Signal sheds,
// the listener does not accept during that share of every period (see
// the package doc, "Pausing"). The period must be positive and at most
// MaxPausePeriod; 10 ms is a good start.
func WithPause(period time.Duration) Option {
	return optionFunc(func(c *config) error {
		if period <= 0 || period > MaxPausePeriod {
			return fmt.Errorf("connguard: pause period %v is not in (0, %v]", period, MaxPausePeriod)
		}
		c.period = period
		return nil
	})
}

// WithBacklog sets the length of the kernel's accept queue of the
// listeners the Guard wraps, on Linux, to n (the kernel's
// net.core.somaxconn caps it; Go listens with that cap): with WithPause,
// a short queue makes the kernel drop the SYNs of the surplus connections
// while the listener does not accept, and keeps the connections waiting in
// the queue fresh. Elsewhere it changes nothing. An n below 1 is an error.
func WithBacklog(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("connguard: backlog %d is below 1", n)
		}
		c.backlog = n
		return nil
	})
}

// WithIdleShed makes the Guard close, while the Signal sheds a share f,
// that share of its connections as they go idle (http.StateIdle, through
// ConnState), so that their clients' next requests come through Accept,
// where the Guard refuses or paces them, instead of reaching the handler
// on a kept-alive connection.
func WithIdleShed() Option {
	return optionFunc(func(c *config) error {
		c.idleShed = true
		return nil
	})
}

// New returns a Guard that holds at most maxConns connections at once
// (Unbounded for no bound) and refuses the share of new connections that
// sig sheds. It returns an error (starting with "connguard: ") for a nil
// sig, a maxConns below 1 and a bad option value.
func New(sig Signal, maxConns int, opts ...Option) (*Guard, error) {
	if sig == nil {
		return nil, errors.New("connguard: New with a nil Signal")
	}
	if maxConns < 1 {
		return nil, fmt.Errorf("connguard: connection bound %d is below 1 (Unbounded for none)", maxConns)
	}
	cfg := config{refusal: Respond, retryAfter: DefaultRetryAfter}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("connguard: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	secs := (cfg.retryAfter + time.Second - 1) / time.Second
	resp := "HTTP/1.1 503 Service Unavailable\r\nRetry-After: " + strconv.FormatInt(int64(secs), 10) +
		"\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
	g := &Guard{sig: sig, max: maxConns, refusal: cfg.refusal, resp: []byte(resp),
		period: cfg.period, backlog: cfg.backlog, idleShed: cfg.idleShed, wake: make(chan struct{}, 1)}
	if cfg.earlyAnswer {
		ws, ok := sig.(WaitShedder)
		if !ok {
			return nil, errNoWaitShedder
		}
		g.waits, g.answers, g.earlyWrite = ws, newEarlyAnswers(), earlyWriteTimeout
	}
	return g, nil
}

// spreader spreads a share over a sequence of events: each event adds the
// share (scaled to 2^64) and a wrap-around picks it, so that exactly
// floor(n*share) of n events are picked, give or take one, whatever their
// interleaving.
type spreader struct{ acc atomic.Uint64 }

// pick reports whether this event is in the share f. NaN and shares not
// above zero pick nothing; shares of one and more pick everything.
func (s *spreader) pick(f float64) bool {
	var step uint64
	switch {
	case f >= 1:
		return true
	case f > 0:
		step = uint64(math.Ldexp(f, 64))
	default:
		return false
	}
	// The add wrapped around iff the accumulated share crossed a whole event.
	return s.acc.Add(step) < step
}

// shedNow reports whether the connection being accepted is in the share
// the Signal sheds.
func (g *Guard) shedNow() bool { return g.conns.pick(g.sig.Shedding()) }

// admit decides a connection past the Signal: it joins the held list, in
// place of the oldest idle connection at the bound, which admit returns to
// be closed. It reports false when the bound leaves no room.
func (g *Guard) admit(c *conn) (victim *conn, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n >= g.max {
		if victim = g.victim(); victim == nil {
			return nil, false
		}
		g.unlink(victim)
	}
	g.n++
	c.prev, c.held = g.tail, true
	if g.tail != nil {
		g.tail.next = c
	} else {
		g.head = c
	}
	g.tail = c
	return victim, true
}

// victimSample is how many idle connections victim compares.
const victimSample = 32

// victim picks the connection to close for a new one at the bound (under
// mu) and marks it evicted: of the first victimSample idle connections on
// the held list, the one idle the longest. Clients hand out their latest
// idle connection first (net/http's Transport and most pools), so that
// the one idle the longest is the least likely to be carrying a request
// to the server as it is closed: such a request fails (or is retried on a
// new connection) instead of being answered. It returns nil when none is
// idle.
func (g *Guard) victim() *conn {
	for {
		var best *conn
		seen := 0
		for v := g.head; v != nil && seen < victimSample; v = v.next {
			if v.state.Load() != stateIdle {
				continue
			}
			if seen++; best == nil || v.used.Load() < best.used.Load() {
				best = v
			}
		}
		// The CAS loses to a request that made best active just now: then
		// look again.
		if best == nil || best.state.CompareAndSwap(stateIdle, stateEvicted) {
			return best
		}
	}
}

// unlink takes c off the held list (under mu).
func (g *Guard) unlink(c *conn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		g.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		g.tail = c.prev
	}
	c.prev, c.next, c.held = nil, nil, false
	g.n--
}

// release takes a closed connection off the held list, once.
func (g *Guard) release(c *conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.held {
		g.unlink(c)
	}
}

// ConnState tracks the state of the Guard's connections for the bound: set
// it as the http.Server's ConnState (or call it from the server's own).
// Connections that are not the Guard's listener's (after unwrapping a
// *tls.Conn or any conn with a NetConn method) are ignored. Safe for
// concurrent use; a few atomic operations, no lock. With WithIdleShed, a
// connection going idle reads the Signal too and may be closed here; with
// WithPause, a connection going idle ends a pause early, so that Accept
// reads the Signal again (a request that ended may have changed it).
func (g *Guard) ConnState(nc net.Conn, s http.ConnState) {
	c := own(nc)
	if c == nil || c.g != g {
		return
	}
	c.tracked.Store(true)
	switch s {
	case http.StateActive:
		c.setState(stateActive)
	case http.StateIdle:
		c.finished()
		c.setState(stateIdle)
		if g.idleShed && g.idle.pick(g.sig.Shedding()) && c.state.CompareAndSwap(stateIdle, stateEvicted) {
			g.ctr.idleShed.Add(1)
			_ = c.Close() // the server's read of the next request fails and its goroutine ends
		}
		g.nudge()
	case http.StateHijacked:
		c.setState(stateHijacked)
	}
}

// ConnContext returns ctx carrying the arrival times of nc (see
// shed.WithArrivals), when nc is one of the Guard's connections (after
// unwrapping as ConnState does): set it as the http.Server's ConnContext
// (or call it from the server's own), so that the middleware knows how
// long each request waited in the server before it ran (Attempt.Queued)
// and an Adaptive rule of Default sheds those that waited past its queue
// bound. On Linux the Guard reads its TCP connections with the kernel's
// receive timestamps (SO_TIMESTAMPNS): the wait counts from when the
// bytes reached the host, so that it includes the accept queue, the
// socket buffer and the Go run queue, where a CPU-bound server's queue
// is. Elsewhere, and for connections that are not TCP, ctx is returned
// as it is. Safe for concurrent use.
func (g *Guard) ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c := own(nc); c != nil && c.g == g && c.arr != nil {
		return shed.WithArrivals(ctx, c)
	}
	return ctx
}

// Install wires the Guard into srv: its ConnState and ConnContext become
// the Guard's, after srv's own when it has them (srv's ConnState is
// called first; srv's ConnContext's context is the one the Guard adds
// to). Then srv.Serve(g.Listener(ln)) serves behind the Guard with the
// bound, idle connections closed first and each request's arrival time.
// Call it before serving, once; it is not safe for concurrent use with
// srv.
func (g *Guard) Install(srv *http.Server) {
	if prev := srv.ConnState; prev != nil {
		srv.ConnState = func(c net.Conn, s http.ConnState) {
			prev(c, s)
			g.ConnState(c, s)
		}
	} else {
		srv.ConnState = g.ConnState
	}
	if prev := srv.ConnContext; prev != nil {
		srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			return g.ConnContext(prev(ctx, c), c)
		}
	} else {
		srv.ConnContext = g.ConnContext
	}
}

// own returns the Guard's conn under nc, or nil.
func own(nc net.Conn) *conn {
	for range 8 { // a bounded unwrapping: tls.Conn and its like
		switch v := nc.(type) {
		case *conn:
			return v
		case interface{ NetConn() net.Conn }:
			nc = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}
