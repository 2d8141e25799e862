package fallback

import (
	"context"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// Lease limits of a Store's local decisions: bit 31 marks a lease of the
// local store, bits 24..30 the generation of that store (it is made anew
// when N changes), bits 0..23 the LimitID.
const (
	localBit    = store.LimitID(1) << 31
	genShift    = 24
	genMask     = 0x7f
	limitIDMask = store.LimitID(1)<<genShift - 1
)

// localStore is the local Memory for one N.
type localStore struct {
	mem  *store.Memory
	gen  store.LimitID
	n    int64
	zero []bool // per LimitID-1: the share rounds to zero, reject
	// episode is the breaker opening this store serves: while the
	// breaker stays open, the store (its N and what it counted) is kept.
	episode uint64
}

// holdPlace takes the next LimitID of m and frees it at once: the place of
// a limit that is gone or not this Store's, a one-key table. Its name is
// one that no limit of m holds (a limit may take any name), so the
// Register cannot fail and the IDs stay in line.
func holdPlace(m *store.Memory) {
	spec := store.Spec{Algorithm: store.FixedWindow, Limit: 1, Window: time.Second, Capacity: 1}
	for i := 0; ; i++ {
		spec.Name = "fallback: held place " + strconv.Itoa(i)
		if id, err := m.Register(context.Background(), spec); err == nil {
			_ = m.Unregister(context.Background(), id)
			return
		}
	}
}

// registerShare registers spec divided by n in m and reports whether the
// share rounds to zero (then the whole spec holds the LimitID's place and
// is never used).
func registerShare(m *store.Memory, spec store.Spec, n int64) bool {
	if share, ok := shareOf(spec, n); ok {
		if _, err := m.Register(context.Background(), share); err == nil {
			return false
		}
	}
	// Spec passed the remote's validation, so Memory takes it.
	_, _ = m.Register(context.Background(), spec)
	return true
}

// shareOf returns this instance's share of spec among n instances, and
// false when it rounds to zero (or a token bucket's refill would be too
// slow to represent).
func shareOf(spec store.Spec, n int64) (store.Spec, bool) {
	share := spec
	share.Limit = spec.Limit / n
	if spec.Algorithm == store.TokenBucket {
		share.Rate = ratelimit.Rate{Count: spec.Rate.Count, Per: spec.Rate.Per * time.Duration(n)}
		if share.Rate.Per/time.Duration(n) != spec.Rate.Per {
			return share, false // overflow: too slow to share
		}
	}
	return share, share.Limit > 0
}

// localFor returns the local store for the current N, making it anew when
// N changed; while the breaker is open, it keeps the store it returned
// first since the breaker opened, so that no change of N resets what was
// counted locally.
func (f *Store) localFor() *localStore {
	if l := f.local.Load(); l != nil && f.current(l) {
		return l
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.local.Load()
	if l != nil && f.current(l) {
		return l
	}
	n, ep := f.instances.Load(), f.episode.Load()
	if l != nil && l.n == n {
		// The right N already: it serves this opening too.
		nl := *l
		nl.episode = ep
		f.local.Store(&nl)
		return &nl
	}
	nl := f.buildLocal(l, n, ep)
	f.local.Store(nl)
	return nl
}

// buildLocal makes a local store of the limits for N n, breaker opening
// ep, the generation after l's (nil: the first). Caller holds f.mu.
func (f *Store) buildLocal(l *localStore, n int64, ep uint64) *localStore {
	nl := &localStore{mem: store.NewMemory(), n: n, episode: ep}
	if l != nil {
		nl.gen = (l.gen + 1) & genMask
	}
	for _, lim := range f.load() {
		if lim.gone {
			// Hold its LimitID's place, so that the IDs line up.
			holdPlace(nl.mem)
			nl.zero = append(nl.zero, false)
			continue
		}
		nl.zero = append(nl.zero, registerShare(nl.mem, lim.spec, n))
	}
	return nl
}

// current reports whether l is the local store to decide on now: the one
// of this opening while the breaker is open, the one of the current N
// while it is closed.
func (f *Store) current(l *localStore) bool {
	if f.open.Load() {
		return l.episode == f.episode.Load()
	}
	return l.n == f.instances.Load()
}

func (f *Store) decideLocal(ctx context.Context, req *store.Request, res *store.Result) error {
	limits := f.load()
	hits := req.Hits[:req.N]
	l := f.localFor()
	f.fallbacks.Add(1)
	for j := range hits {
		id := hits[j].Limit
		if limits[id-1].failClosed || (int(id) <= len(l.zero) && l.zero[id-1]) {
			return f.rejectAt(ctx, l, req, res, j)
		}
	}
	if err := l.mem.Decide(ctx, req, res); err != nil {
		return err
	}
	for i := range res.Hits[:res.N] {
		if lease := &res.Hits[i].Lease; lease.Held() {
			lease.Limit |= localBit | l.gen<<genShift
		}
	}
	return nil
}

// rejectAt rejects req at hit j, a fail-closed or zero-share limit: the
// hits before it are reported as they stand (peeked, nothing charged).
func (f *Store) rejectAt(ctx context.Context, l *localStore, req *store.Request, res *store.Result, j int) error {
	if j > 0 {
		peek := store.Request{Now: req.Now, N: j}
		for i := range j {
			peek.Hits[i] = store.Hit{Limit: req.Hits[i].Limit, Key: req.Hits[i].Key}
		}
		if err := l.mem.Decide(ctx, &peek, res); err != nil {
			return err
		}
	}
	res.Hits[j] = store.HitResult{Decision: ratelimit.Decision{
		Limit:      f.load()[req.Hits[j].Limit-1].spec.Limit,
		RetryAfter: f.cfg.probe,
		ResetAfter: f.cfg.probe,
	}}
	res.Allowed, res.Decider, res.N, res.Now = false, j, j+1, req.Now
	return nil
}
