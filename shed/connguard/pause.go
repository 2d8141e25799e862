package connguard

import (
	"errors"
	"math"
	"net"
	"os"
	"time"
)

// phase returns where a pacing listener stands at elapsed (the time since
// the listener was made) at the shed share f: the first 1-f of every
// period is open, for open more from elapsed, and the rest is closed, for
// closed more; one of the two is zero. A share that is NaN or not above
// zero leaves the whole period open; one of one or more closes it all.
func phase(elapsed, period time.Duration, f float64) (open, closed time.Duration) {
	into := elapsed % period
	switch {
	case !(f > 0):
		return period - into, 0
	case f < 1:
		if o := time.Duration(float64(period) * (1 - f)); into < o {
			return o - into, 0
		}
	}
	return 0, period - into
}

// deadliner is a listener whose Accept can be given a deadline, as
// *net.TCPListener and *net.UnixListener.
type deadliner interface{ SetDeadline(time.Time) error }

// acceptPaced is Accept of ln for a pacing listener: it waits out the
// closed part of the period first, and gives ln's Accept the end of the
// open part as its deadline, when ln takes one, so that the Signal is read
// again at least once a period and an Accept that waits in ln when
// shedding begins does not take a connection in a closed part.
func (l *listener) acceptPaced() (net.Conn, error) {
	for {
		open, err := l.pause()
		if err != nil {
			return nil, err
		}
		dl, ok := l.Listener.(deadliner)
		if ok {
			_ = dl.SetDeadline(time.Now().Add(open))
		}
		nc, err := l.Listener.Accept()
		if err != nil && ok && errors.Is(err, os.ErrDeadlineExceeded) {
			continue // the open part ended
		}
		return nc, err
	}
}

// pause waits while the Guard's pacing keeps l closed, or while the Guard
// holds its bound of connections and none of them is idle (so that a
// connection past the bound waits in the kernel's queue instead of being
// accepted and refused), and returns the open time left, or net.ErrClosed
// when l is closed meanwhile. A wait ends at the end of the closed part of
// the period (of the open part, at the bound) or on a nudge, whichever
// comes first, and the Signal and the bound are read again.
func (l *listener) pause() (time.Duration, error) {
	g := l.g
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		now := time.Now()
		f := g.sig.Shedding()
		open, d := phase(now.Sub(l.made), g.period, f)
		full := d == 0 && g.noRoom()
		if d == 0 && !full {
			return open, nil
		}
		if full {
			d = open
		}
		g.pausedAt.Store(math.Float64bits(f))
		g.forRoom.Store(full)
		if t == nil {
			t = time.NewTimer(d)
		} else {
			t.Reset(d)
		}
		g.ctr.pauses.Add(1)
		g.waiting.Add(1)
		var err error
		select {
		case <-t.C:
		case <-g.wake:
		case <-l.done:
			err = net.ErrClosed
		}
		g.waiting.Add(-1)
		g.ctr.pausedNS.Add(uint64(time.Since(now)))
		if err != nil {
			return 0, err
		}
	}
}

// noRoom reports whether the Guard holds its bound of connections and
// none of them is idle: admit would refuse the next one. At the bound it
// walks the held list, as admit does.
func (g *Guard) noRoom() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n < g.max {
		return false
	}
	for v := g.head; v != nil; v = v.next {
		if v.state.Load() == stateIdle {
			return false
		}
	}
	return true
}

// nudge ends one wait of a pausing listener early, if one waits and either
// it waits for room (a connection closed or went idle: there may be room
// now) or the Signal sheds less than when it began (a request ended and
// may have closed a window of the Signal's). It costs one atomic load
// when no listener waits, and one read of the Signal when one does, so
// that requests that end while the share holds do not wake the listener.
func (g *Guard) nudge() {
	if g.waiting.Load() == 0 {
		return
	}
	if !g.forRoom.Load() && !(g.sig.Shedding() < math.Float64frombits(g.pausedAt.Load())) {
		return
	}
	select {
	case g.wake <- struct{}{}:
	default: // a nudge is pending already
	}
}
