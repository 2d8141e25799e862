package regions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// errFull is the cause of a decision on a new key beyond the capacity.
var errFull = errors.New("regions: too many keys tracked (WithCapacity)")

// Store is a store.Store of one region that enforces global quotas across
// regions: it decides every request on the region's own store in real
// time, and a background sync exchanges each key's usage with the other
// regions through a global Exchange, so that the region admits a key at
// most its allowance, the global limit minus a headroom minus what the
// other regions used of the key in the window (see the package doc for
// the bound).
//
// A global limit must be a store.FixedWindow (the regions' counts of one
// window add up; every store places windows alike) and the region's store
// a store.Refunder: Decide charges the region's store first and gives a
// charge back when it went past the allowance. Limits marked WithPerRegion
// are the region store's alone, any algorithm, the whole limit per region.
//
// A Store is safe for concurrent use. Decide costs the region store's
// Decide plus, for a global limit, two short critical sections on a
// sharded table of the keys in their current window (bounded by
// WithCapacity); a rejection for the allowance costs one Refund more. The
// sync runs on a goroutine the Store owns; Close stops it. Use New; the
// zero value is not usable.
type Store struct {
	region   string
	local    store.Store
	refunder store.Refunder // local, when it is one
	exchange Exchange
	cfg      config

	mu     sync.Mutex // serializes Register, Update and Unregister
	limits atomic.Pointer[[]*limit]
	keys   atomic.Int64 // tracked over every limit

	syncs, syncErrors, overAllowance atomic.Uint64
	lagNS, lastSync                  atomic.Int64
	cutOff                           atomic.Bool

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Updater  = (*Store)(nil)
	_ store.Resetter = (*Store)(nil)
	_ store.Refunder = (*Store)(nil)
)

// limit is a registered limit: per-region (keys nil) or global.
type limit struct {
	spec     store.Spec
	clock    store.WindowClock
	headroom int64
	keys     *keyTable // nil: per-region
}

// Stats is a snapshot of a Store's sync.
type Stats struct {
	// Syncs and SyncErrors count the rounds that exchanged usage with the
	// global store and those that failed (the allowances then stay as they
	// were).
	Syncs, SyncErrors uint64
	// CutOff reports that the last round failed.
	CutOff bool
	// Lag is how long the last round's Publish and Others took together;
	// LastSync when it ended (zero before the first).
	Lag      time.Duration
	LastSync time.Time
	// Keys is the number of keys tracked in their current windows.
	Keys int64
	// OverAllowance counts the decisions rejected for the allowance (the
	// region's store admitted them).
	OverAllowance uint64
}

// New returns the Store of region (a non-empty name, the same for every
// instance of the region) deciding on local, the region's store, and
// exchanging usage through exchange, and starts its sync goroutine (stop
// it with Close). It does no I/O. It returns an error starting with
// "regions: " for a missing argument or a bad option.
func New(region string, local store.Store, exchange Exchange, opts ...Option) (*Store, error) {
	if region == "" || local == nil || exchange == nil {
		return nil, errors.New("regions: New needs a region name, the region's store and an Exchange")
	}
	cfg := config{period: DefaultPeriod, headroom: DefaultHeadroom, capacity: DefaultCapacity, timeout: DefaultSyncTimeout}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("regions: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.readDelay == 0 {
		cfg.readDelay = cfg.period / 4
	}
	if cfg.readDelay >= cfg.period {
		return nil, fmt.Errorf("regions: read delay %v must be shorter than the period %v", cfg.readDelay, cfg.period)
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	s := &Store{region: region, local: local, exchange: exchange, cfg: cfg, done: make(chan struct{})}
	s.refunder, _ = local.(store.Refunder)
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.loop(ctx)
	return s, nil
}

// Close stops the sync goroutine; decisions go on, on the last allowances.
// It is idempotent and returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.done
	})
	return nil
}

// Stats returns a snapshot of the sync's counters.
func (s *Store) Stats() Stats {
	st := Stats{
		Syncs:         s.syncs.Load(),
		SyncErrors:    s.syncErrors.Load(),
		CutOff:        s.cutOff.Load(),
		Lag:           time.Duration(s.lagNS.Load()),
		Keys:          s.keys.Load(),
		OverAllowance: s.overAllowance.Load(),
	}
	if t := s.lastSync.Load(); t != 0 {
		st.LastSync = time.Unix(0, t)
	}
	return st
}

func (s *Store) load() []*limit {
	if p := s.limits.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *Store) lookup(id store.LimitID) *limit {
	ls := s.load()
	if id == 0 || int(id) > len(ls) {
		return nil
	}
	return ls[id-1]
}

// Register registers spec on the region's store and returns its LimitID.
// A limit not marked WithPerRegion is global: it must be a
// store.FixedWindow, on a region store that is a store.Refunder; an error
// starting with "store: " says otherwise. The region store's errors are
// returned as they are.
func (s *Store) Register(ctx context.Context, spec store.Spec) (store.LimitID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var l *limit
	if !s.cfg.perRegion[spec.Name] {
		if err := spec.Validate(); err != nil {
			return 0, err
		}
		if spec.Algorithm != store.FixedWindow {
			return 0, fmt.Errorf("store: limit %q: a quota shared across regions must be a fixed window, not %v; mark it per-region (regions.WithPerRegion) to enforce it in full in each region", spec.Name, spec.Algorithm)
		}
		if s.refunder == nil {
			return 0, fmt.Errorf("store: limit %q: the region's store %T gives nothing back (store.Refunder), which a quota shared across regions needs", spec.Name, s.local)
		}
		l = &limit{spec: spec, clock: spec.Calendar.Clock(spec.Window),
			headroom: int64(s.cfg.headroom * float64(spec.Limit)), keys: newKeyTable(&s.keys, s.cfg.capacity)}
	} else {
		l = &limit{spec: spec}
	}
	id, err := s.local.Register(ctx, spec)
	if err != nil {
		return 0, err
	}
	next := slices.Clip(s.load())
	for len(next) < int(id)-1 {
		next = append(next, nil) // another user's of the region store
	}
	if int(id) <= len(next) {
		_ = s.local.Unregister(ctx, id)
		return 0, fmt.Errorf("store: the region's store handed out limit %d after %d: regions needs increasing IDs", id, len(next))
	}
	next = append(next, l)
	s.limits.Store(&next)
	return id, nil
}

// Update changes limit id in place on the region's store (store.Updater)
// and, for a global limit, its allowance from the next decision on (the
// keys' counts carry over). Errors are the region store's, one matching
// errors.ErrUnsupported when it is no store.Updater, and one matching
// store.ErrUnknownLimit for an id not registered here.
func (s *Store) Update(ctx context.Context, id store.LimitID, spec store.Spec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.lookup(id)
	if old == nil {
		return fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	u, ok := s.local.(store.Updater)
	if !ok {
		return fmt.Errorf("store: %T cannot update a limit in place: %w", s.local, errors.ErrUnsupported)
	}
	if err := u.Update(ctx, id, spec); err != nil {
		return err
	}
	nl := *old
	nl.spec = spec
	if nl.keys != nil {
		nl.headroom = int64(s.cfg.headroom * float64(spec.Limit))
	}
	next := slices.Clone(s.load())
	next[id-1] = &nl
	s.limits.Store(&next)
	return nil
}

// Unregister drops limit id from the region's store and stops tracking its
// keys. It returns an error matching store.ErrUnknownLimit when id is not
// registered here, and the region store's errors.
func (s *Store) Unregister(ctx context.Context, id store.LimitID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.lookup(id)
	if old == nil {
		return fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	if err := s.local.Unregister(ctx, id); err != nil {
		return err
	}
	next := slices.Clone(s.load())
	next[id-1] = nil
	s.limits.Store(&next)
	if old.keys != nil {
		old.keys.clear()
	}
	return nil
}

// Decide decides req on the region's store and, for every hit of a global
// limit, against the key's allowance: limit − headroom − what the other
// regions used in the window, as of the last sync. A hit over its allowance
// rejects the request (a ReasonLimited decision whose RetryAfter is the end
// of the window): what the region's store charged is given back
// (store.Refunder) and leases it granted are released, before Decide
// returns. An admitted hit's Remaining is what its allowance has left.
//
// Errors: those of the region's store (store.ErrUnavailable when it is
// down, for the rule's failure policy), one matching store.ErrUnknownLimit
// for a limit not registered here, and one matching store.ErrUnavailable,
// with nothing charged, for a new key of a global limit when WithCapacity
// keys are tracked already.
func (s *Store) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	if req == nil || res == nil {
		return errors.New("store: Decide needs a request and a result")
	}
	if err := req.Check(); err != nil {
		return err
	}
	var lim [store.MaxHits]*limit
	global := false
	for i := range req.Hits[:req.N] {
		h := &req.Hits[i]
		l := s.lookup(h.Limit)
		if l == nil {
			return fmt.Errorf("%w: hit %d names limit %d", store.ErrUnknownLimit, i, h.Limit)
		}
		lim[i] = l
		if l.keys != nil && h.MaxWait > 0 {
			// A global quota's allowance is of the current window; a slot
			// reserved in a later one would be counted against it.
			return fmt.Errorf("store: a global quota cannot reserve (hit %d has a max wait of %v): %w",
				i, h.MaxWait, errors.ErrUnsupported)
		}
		if l.keys != nil {
			global = true
			if h.Cost > 0 && !l.keys.admit(h.Key) {
				if s.lookup(h.Limit) != l {
					return fmt.Errorf("%w: hit %d names limit %d", store.ErrUnknownLimit, i, h.Limit)
				}
				return store.Unavailable(errFull)
			}
		}
	}
	if err := s.local.Decide(ctx, req, res); err != nil || !res.Allowed || !global {
		return err
	}
	over := -1
	for i := range req.Hits[:req.N] {
		l, h := lim[i], &req.Hits[i]
		if l.keys == nil {
			continue
		}
		d := &res.Hits[i].Decision
		used := d.Limit - d.Remaining
		window := l.clock.At(max(res.Now, 0)) / int64(l.clock.Span())
		var others int64
		if h.Cost > 0 {
			others = l.keys.observe(h.Key, window, used)
		} else {
			others = l.keys.peekOthers(h.Key, window)
		}
		allowance := l.spec.Limit - l.headroom - others
		if h.Cost > 0 && used > allowance && over < 0 {
			over = i
		}
		d.Remaining = max(0, min(d.Remaining, allowance-used))
	}
	if over < 0 {
		res.Decider = 0
		for i := range res.Hits[:res.N] {
			if res.Hits[i].Decision.Remaining < res.Hits[res.Decider].Decision.Remaining {
				res.Decider = i
			}
		}
		return nil
	}
	return s.reject(ctx, req, res, &lim, over)
}

// reject gives back what the admitted res charged for req and makes res a
// rejection by hit j, over its allowance.
func (s *Store) reject(ctx context.Context, req *store.Request, res *store.Result, lim *[store.MaxHits]*limit, j int) error {
	s.overAllowance.Add(1)
	if err := s.refunder.Refund(ctx, req, res); err != nil {
		// Counted in the region's store until its window ends: the
		// region admits less, never more.
		s.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "regions: a charge over the allowance was not given back",
			slog.String("region", s.region), slog.String("error", err.Error()))
	}
	// The keys' counts keep what was observed: until the region's store
	// counts more, this region reports up to one cost more than it holds,
	// so the others admit less, never more.
	for i := range res.Hits[:res.N] {
		if lease := res.Hits[i].Lease; lease.Held() {
			_ = s.local.Release(ctx, lease, req.Now)
		}
	}
	d := res.Hits[j].Decision
	wait := max(d.ResetAfter, 1)
	res.Hits[j] = store.HitResult{Decision: ratelimit.Decision{Limit: lim[j].spec.Limit, RetryAfter: wait, ResetAfter: wait}}
	for i := range j {
		res.Hits[i].Lease = store.Lease{}
	}
	res.Allowed, res.Decider, res.N = false, j, j+1
	return nil
}

// Release releases a lease on the region's store (per-region concurrency
// limits). Errors are the region store's.
func (s *Store) Release(ctx context.Context, lease store.Lease, now int64) error {
	return s.local.Release(ctx, lease, now)
}

// Refund gives back req's hits on the region's store (store.Refunder). What
// this region published to the others stays as published until the window
// ends (the others count it: they admit less, never more). Errors are the
// region store's.
func (s *Store) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	if s.refunder == nil {
		return fmt.Errorf("store: %T cannot refund: %w", s.local, errors.ErrUnsupported)
	}
	return s.refunder.Refund(ctx, req, res)
}

// Reset forgets key of limit id in this region's store (store.Resetter).
// The other regions' counts, and what this region published, stay until
// the window ends: to give a key its global quota back, reset it in every
// region's store and in the Exchange. Errors are the region store's, one
// matching errors.ErrUnsupported when it is no store.Resetter.
func (s *Store) Reset(ctx context.Context, id store.LimitID, key string) error {
	l := s.lookup(id)
	if l == nil {
		return fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	r, ok := s.local.(store.Resetter)
	if !ok {
		return fmt.Errorf("store: %T cannot reset a key: %w", s.local, errors.ErrUnsupported)
	}
	if err := r.Reset(ctx, id, key); err != nil {
		return err
	}
	if l.keys != nil {
		l.keys.reset(key)
	}
	return nil
}
