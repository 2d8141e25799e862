package regions

import (
	"context"
	"sync"
	"time"
)

// Usage is one region's use of one key of one limit in one window, as the
// regions exchange it.
type Usage struct {
	// Limit is the limit's name (store.Spec.Name), the same in every region.
	Limit string
	// Key is the hit key.
	Key string
	// Window is the window's index on the limit's window clock
	// (store.WindowClock.At divided by its Span), the same in every region.
	Window int64
	// Used is a count: what this region counted in the window (Publish),
	// or the sum of what the other regions published (Others).
	Used int64
	// TTL is how long the global store keeps the entry (Publish): past
	// the window's end, after which it counts no more.
	TTL time.Duration
}

// Exchange is the global store through which the regions share their usage
// (redisstore.NewExchange on a global Redis; MemoryExchange in one
// process). Implementations are safe for concurrent use; a call that does
// I/O honours ctx and returns an error when the global store fails.
type Exchange interface {
	// Publish records region's usage. For each limit, key and window the
	// store keeps, per region, the largest Used ever published (several
	// instances of one region publish the same count, read from the
	// region's store; a count within a window only grows).
	Publish(ctx context.Context, region string, usage []Usage) error
	// Others sets the Used of each entry of usage to the sum of what the
	// regions other than region published for its limit, key and window
	// (0 when none did).
	Others(ctx context.Context, region string, usage []Usage) error
}

// MemoryExchange is an Exchange in this process's memory: the global store
// of regions that live in one process (tests, the examples, a simulation).
// Entries never expire before their window is superseded: each limit and
// key keeps only its latest window. It is safe for concurrent use and never
// blocks but on its lock. The zero value is an empty exchange.
type MemoryExchange struct {
	mu sync.Mutex
	m  map[exchangeKey]*exchangeEntry
}

var _ Exchange = (*MemoryExchange)(nil)

type exchangeKey struct{ limit, key string }

// exchangeEntry is one limit and key's latest window: each region's count.
type exchangeEntry struct {
	window int64
	used   map[string]int64
}

// Publish records region's usage (see Exchange). It never fails.
func (x *MemoryExchange) Publish(_ context.Context, region string, usage []Usage) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = make(map[exchangeKey]*exchangeEntry)
	}
	for _, u := range usage {
		k := exchangeKey{u.Limit, u.Key}
		e := x.m[k]
		switch {
		case e == nil || u.Window > e.window:
			e = &exchangeEntry{window: u.Window, used: make(map[string]int64)}
			x.m[k] = e
		case u.Window < e.window:
			continue // a window that has passed
		}
		e.used[region] = max(e.used[region], u.Used)
	}
	return nil
}

// Others fills usage with the other regions' sums (see Exchange). It
// never fails.
func (x *MemoryExchange) Others(_ context.Context, region string, usage []Usage) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range usage {
		u := &usage[i]
		u.Used = 0
		e := x.m[exchangeKey{u.Limit, u.Key}]
		if e == nil || e.window != u.Window {
			continue
		}
		for r, n := range e.used {
			if r != region {
				u.Used += n
			}
		}
	}
	return nil
}
