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

// pause waits while the Guard's pacing keeps l closed, and returns the
// open time left, or net.ErrClosed when l is closed
// meanwhile. A wait ends at the end of the closed part of the period or
// on a nudge, whichever comes first, and the Signal is read again.
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
		if d == 0 {
			return open, nil
		}
		g.pausedAt.Store(math.Float64bits(f))
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

// nudge ends one wait of a pausing listener early, if one waits and the
// Signal sheds less than when it began: a connection went idle or closed,
// so a request ended and may have closed a window of the Signal's. It
// costs one atomic load when no listener waits, and one read of the
// Signal when one does, so that requests that end while the share holds
// do not wake the listener.
func (g *Guard) nudge() {
	if g.waiting.Load() == 0 || !(g.sig.Shedding() < math.Float64frombits(g.pausedAt.Load())) {
		return
	}
	select {
	case g.wake <- struct{}{}:
	default: // a nudge is pending already
	}
}
