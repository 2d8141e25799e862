// Package loggate keeps a flood of events from becoming a flood of log
// lines: a Gate lets a few lines of one kind through per interval and
// counts the ones it holds back, so the next line can say how many it
// stands for. Every package of sluice that logs on a path a client can
// drive (a rejection, a failing store, a strange peer) logs through one.
package loggate

import (
	"sync"
	"sync/atomic"
	"time"
)

// Gate lets Burst lines of its kind through per interval of Every and
// counts the rest. The zero value lets one line a second through. Every
// and Burst are set before first use and not changed after. Safe for
// concurrent use. A held line costs two loads and an add: no lock, no
// allocation; only a line that may be let through takes the lock, which
// makes opening an interval and counting in it one step.
type Gate struct {
	// Every is the interval; zero means one second.
	Every time.Duration
	// Burst is how many lines an interval lets through; zero means one.
	Burst int64

	mu    sync.Mutex   // serialises letting lines through
	open  atomic.Bool  // an interval has been opened
	start atomic.Int64 // the current interval's start
	n     atomic.Int64 // lines let through in the current interval
	held  atomic.Int64 // lines held back since the last one let through
}

// Allow reports whether a line may be written at now (nanoseconds on the
// caller's clock) and, when it may, how many lines were held back since
// the previous one that was let through. An interval starts at the first
// line asked for after the previous interval ended.
func (g *Gate) Allow(now int64) (ok bool, held int64) {
	every, burst := int64(g.Every), g.Burst
	if every <= 0 {
		every = int64(time.Second)
	}
	if burst <= 0 {
		burst = 1
	}
	if g.open.Load() && now-g.start.Load() < every && g.n.Load() >= burst {
		g.held.Add(1) // the common case under a flood: the interval is spent
		return false, 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open.Load() || now-g.start.Load() >= every {
		g.start.Store(now)
		g.n.Store(0)
		g.open.Store(true)
	}
	if g.n.Load() >= burst {
		g.held.Add(1)
		return false, 0
	}
	g.n.Add(1)
	return true, g.held.Swap(0)
}
