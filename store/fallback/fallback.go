package fallback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/loggate"
	"github.com/sluicehq/sluice/store"
)

// errDegraded is the cause of a Release refused while the breaker is open.
var errDegraded = errors.New("fallback: degraded to local limits")

// Store is a store.Store that decides on a remote store while it answers
// and on a local store.Memory when it does not, with each limit divided
// among the live instances.
//
// A circuit breaker chooses. Closed, every call goes to the remote; each
// call that fails with store.ErrUnavailable (an error, a missed deadline)
// is decided locally instead, and WithTripAfter consecutive failures open
// the breaker. Open, decisions go straight to the local store, with no
// remote latency added. A goroutine owned by the Store beats a heartbeat
// into the remote's Membership every probe interval; while the breaker is
// open the heartbeat is the probe, and WithRecoverAfter consecutive
// successes close it again.
//
// The local store enforces each instance's share: every limit (and a token
// bucket's rate) divided by N, rounded down, where N is the number of
// instances the Membership counts (those that beat within the instance
// memory, WithInstanceMemory, a minute by default, and did not Close), or
// WithInstances' fixed N. So the service as a whole never exceeds its
// quota while the remote is down for every instance; see the package doc
// for the bound when it is down for some. While the breaker is open N does
// not change and the local store keeps what it counted, however few
// instances a remote that comes back empty counts before this one closes
// its breaker. A limit whose share rounds to zero, and a limit marked
// WithFailClosed, rejects while degraded. Local decisions are made at
// Request.Now, so callers must fill it with their monotonic clock
// (internal/clock's Now) as for store.Memory; local state starts fresh
// when the breaker opens with an N other than the last local store's.
//
// Leases taken locally carry a Limit with bit 31 set; Release routes them
// to the local store (after the local store was made anew they are no
// longer held). Releasing a remote lease while the breaker is open fails
// with store.ErrUnavailable: its permits come back at its expiry.
//
// Every mode change is counted in Stats and logged (WithLogger), one line
// per change, at most one a second. A Store is safe for concurrent use,
// by several Controllers too. Several Stores may also wrap one remote
// store: each decides only the limits registered through it (others'
// LimitIDs are unknown to it, remotely as locally). The remote store must
// hand out LimitIDs in increasing order, as store.Registry does.
// Close stops its goroutine. Use New; the zero value is not usable.
type Store struct {
	remote  store.Store
	members Membership
	checker RequestChecker // remote's, or nil
	cfg     config

	mu sync.Mutex // serializes Register, Unregister and local rebuilds
	// limits is copied on write, indexed by LimitID-1, as the remote
	// store's and every local store's limits are.
	limits atomic.Pointer[[]fbLimit]
	local  atomic.Pointer[localStore]

	open       atomic.Bool
	episode    atomic.Uint64 // incremented as the breaker opens
	failures   atomic.Int64  // consecutive failed remote calls
	instances  atomic.Int64  // N, frozen while the breaker is open
	fallbacks  atomic.Uint64
	errs       atomic.Uint64
	trips      atomic.Uint64
	recoveries atomic.Uint64

	modeLog loggate.Latest // the lines of mode changes

	// okProbes counts the successful probes in a row while the breaker
	// is open; the heartbeat goroutine owns it.
	okProbes int

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ store.Store          = (*Store)(nil)
	_ store.Updater        = (*Store)(nil)
	_ store.Resetter       = (*Store)(nil)
	_ store.Refunder       = (*Store)(nil)
	_ store.HealthReporter = (*Store)(nil)
)

// fbLimit is a registered limit of a Store; gone once unregistered.
type fbLimit struct {
	spec       store.Spec
	failClosed bool
	gone       bool
}

// Stats is a snapshot of a Store's mode and counters.
type Stats struct {
	// Degraded reports that the breaker is open: decisions are local.
	Degraded bool
	// Instances is N, the number of instances sharing each limit, and
	// Share its inverse: the fraction of each limit this instance enforces
	// while degraded.
	Instances int64
	Share     float64
	// FallbackDecisions counts decisions made locally.
	FallbackDecisions uint64
	// RemoteErrors counts remote calls that failed with
	// store.ErrUnavailable (decisions, releases and heartbeats).
	RemoteErrors uint64
	// Trips and Recoveries count the breaker's openings and closings.
	Trips, Recoveries uint64
}

// New returns a Store around remote, whose instances members counts, and
// starts its heartbeat goroutine (stop it with Close). It beats once
// before returning, within the remote's deadline, to learn N; when that
// fails, N starts at WithInstances' n or 1 (the whole limit per instance
// until a heartbeat answers) and the breaker counts one failure. When
// remote implements RequestChecker, every request is checked by it. It
// returns an error starting with "fallback: " for a nil remote or
// members, and for a bad option.
func New(remote store.Store, members Membership, opts ...Option) (*Store, error) {
	if remote == nil || members == nil {
		return nil, errors.New("fallback: New needs a remote store and its membership")
	}
	cfg := config{tripAfter: DefaultTripAfter, recoverAfter: DefaultRecoverAfter, probe: DefaultProbeInterval, backend: "the remote store"}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("fallback: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if cfg.memory == 0 {
		cfg.memory = max(DefaultInstanceMemory, 3*cfg.probe)
	} else if cfg.memory < 3*cfg.probe {
		return nil, fmt.Errorf("fallback: instance memory %v must be at least three probe intervals (%v), or live instances drop out of N between their heartbeats", cfg.memory, 3*cfg.probe)
	}
	f := &Store{remote: remote, members: members, cfg: cfg, done: make(chan struct{})}
	f.checker, _ = remote.(RequestChecker)
	f.instances.Store(max(1, cfg.instances))
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.tick(ctx)
	go f.loop(ctx)
	return f, nil
}

// Close stops the heartbeat goroutine and takes this instance out of the
// Membership (within the remote's deadline, best effort). Decisions still
// work after Close, but an open breaker no longer closes. Close is
// idempotent and returns nil.
func (f *Store) Close() error {
	f.closeOnce.Do(func() {
		f.cancel()
		<-f.done
		_ = f.members.Leave(context.Background())
	})
	return nil
}

// Stats returns a snapshot of the mode and counters.
func (f *Store) Stats() Stats {
	n, open := f.instances.Load(), f.open.Load()
	if l := f.local.Load(); open && l != nil && l.episode == f.episode.Load() {
		n = l.n // the N this degraded spell decides on
	}
	return Stats{
		Degraded:          open,
		Instances:         n,
		Share:             1 / float64(n),
		FallbackDecisions: f.fallbacks.Load(),
		RemoteErrors:      f.errs.Load(),
		Trips:             f.trips.Load(),
		Recoveries:        f.recoveries.Load(),
	}
}

// Health reports Stats as a store.Health, for shed's Stats and its metrics.
func (f *Store) Health() store.Health {
	s := f.Stats()
	return store.Health{
		Degraded:          s.Degraded,
		Instances:         s.Instances,
		Share:             s.Share,
		FallbackDecisions: s.FallbackDecisions,
		BackendErrors:     s.RemoteErrors,
		Trips:             s.Trips,
		Recoveries:        s.Recoveries,
	}
}

// Register registers spec with the remote store and, while a local store
// exists, its share there. It returns the remote's errors, and an error
// starting with "store: " when the remote's LimitID does not fit a local
// lease (more than 2^24-1 limits) or is not above every ID it handed out
// before (the remote limit is then unregistered again).
//
// The LimitID is the remote's. Several Stores may wrap one remote store
// (and it may be used directly too): each knows only the limits
// registered through it, under the remote's IDs, and holds the places of
// the others' IDs in its local store, so that the IDs line up there.
func (f *Store) Register(ctx context.Context, spec store.Spec) (store.LimitID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, err := f.remote.Register(ctx, spec)
	if err != nil {
		return 0, err
	}
	next := slices.Clip(f.load())
	if id > limitIDMask || int(id) <= len(next) {
		_ = f.remote.Unregister(ctx, id)
		if id > limitIDMask {
			return 0, fmt.Errorf("store: too many limits for a fallback store")
		}
		return 0, fmt.Errorf("store: the remote store handed out limit %d after %d: a fallback store needs increasing IDs", id, len(next))
	}
	// The remote's IDs grow per Register: those since the last of ours are
	// other users' of the remote store.
	for len(next) < int(id)-1 {
		next = append(next, fbLimit{gone: true})
	}
	next = append(next, fbLimit{spec: spec, failClosed: f.cfg.failClosed[spec.Name]})
	f.limits.Store(&next)
	if l := f.local.Load(); l != nil {
		// Register on a copy's behalf: the Memory is shared, ids line up.
		nl := *l
		nl.zero = slices.Clip(l.zero)
		for len(nl.zero) < int(id)-1 {
			holdPlace(nl.mem)
			nl.zero = append(nl.zero, false)
		}
		nl.zero = append(nl.zero, registerShare(l.mem, spec, l.n))
		f.local.Store(&nl)
	}
	return id, nil
}

// Update changes limit id in place on the remote (store.Updater) and its
// share in the local store, so that decisions keep their usage in either
// mode: the local share is updated in place too (Memory keeps its keys'
// usage) while the share stays above zero. When the share cannot change
// in place (it rounds to zero, or rounded to zero before), the local store
// is built anew, what it had counted lost: that matters only while the
// remote is down. Errors are the remote's Update's, and one matching
// errors.ErrUnsupported when the remote is no store.Updater.
func (f *Store) Update(ctx context.Context, id store.LimitID, spec store.Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.load()
	if !f.known(old, id) {
		return fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	u, ok := f.remote.(store.Updater)
	if !ok {
		return fmt.Errorf("store: %T cannot update a limit in place: %w", f.remote, errors.ErrUnsupported)
	}
	if err := u.Update(ctx, id, spec); err != nil {
		return err
	}
	next := slices.Clone(old)
	next[id-1].spec = spec
	f.limits.Store(&next)
	if l := f.local.Load(); l != nil {
		share, ok := shareOf(spec, l.n)
		if !ok || l.zero[id-1] || l.mem.Update(ctx, id, share) != nil {
			f.local.Store(f.buildLocal(l, l.n, l.episode)) // from the limits above
		}
	}
	return nil
}

// Unregister drops limit id from the remote store and the local one, which
// share LimitIDs. It returns an error matching store.ErrUnknownLimit when
// id is not registered, and the remote's errors.
func (f *Store) Unregister(ctx context.Context, id store.LimitID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.load()
	if !f.known(old, id) {
		return fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	if err := f.remote.Unregister(ctx, id); err != nil {
		return err
	}
	next := slices.Clone(old)
	next[id-1].gone = true
	f.limits.Store(&next)
	if l := f.local.Load(); l != nil {
		// Registered there by Register or localFor, under f.mu.
		_ = l.mem.Unregister(ctx, id)
	}
	return nil
}

// known reports whether id is a live limit of limits.
func (f *Store) known(limits []fbLimit, id store.LimitID) bool {
	return id != 0 && int(id) <= len(limits) && !limits[id-1].gone
}

func (f *Store) load() []fbLimit {
	if p := f.limits.Load(); p != nil {
		return *p
	}
	return nil
}

// Decide decides req on the remote while the breaker is closed and
// locally, on this instance's share, while it is open or when the remote
// call fails with store.ErrUnavailable (see Store). It returns bad input's
// errors and the caller's ctx.Err(); never store.ErrUnavailable.
func (f *Store) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	if err := f.check(req, res); err != nil {
		return err
	}
	if !f.open.Load() {
		err := f.remote.Decide(ctx, req, res)
		if err == nil {
			f.failures.Store(0)
			return nil
		}
		if !errors.Is(err, store.ErrUnavailable) {
			return err
		}
		f.failed(err)
	}
	return f.decideLocal(ctx, req, res)
}

// check returns req.Check's error when req is malformed, the remote's
// RequestChecker's, and an error matching store.ErrUnknownLimit when a hit
// names a limit not registered through this Store (another Store's of the
// same remote, say), so that a decision is the same remotely and locally.
func (f *Store) check(req *store.Request, res *store.Result) error {
	if req == nil || res == nil {
		return fmt.Errorf("store: Decide needs a request and a result")
	}
	if err := req.Check(); err != nil {
		return err
	}
	if f.checker != nil {
		if err := f.checker.CheckRequest(req); err != nil {
			return err
		}
	}
	limits := f.load()
	for i := range req.Hits[:req.N] {
		if id := req.Hits[i].Limit; !f.known(limits, id) {
			return fmt.Errorf("%w: hit %d names limit %d", store.ErrUnknownLimit, i, id)
		}
	}
	return nil
}

// Release releases a local lease locally and a remote lease remotely
// (while the breaker is open, it fails with store.ErrUnavailable at once:
// the lease lapses at its expiry). Errors as store.Store's.
func (f *Store) Release(ctx context.Context, lease store.Lease, now int64) error {
	if !lease.Held() {
		return store.ErrLeaseNotHeld
	}
	if lease.Limit&localBit != 0 {
		l := f.local.Load()
		if l == nil || (lease.Limit>>genShift)&genMask != l.gen {
			return store.ErrLeaseNotHeld
		}
		inner := lease
		inner.Limit &= limitIDMask
		return l.mem.Release(ctx, inner, now)
	}
	if id := lease.Limit; !f.known(f.load(), id) {
		// Bad input, not an outage, even while degraded.
		return fmt.Errorf("%w: lease names limit %d", store.ErrUnknownLimit, id)
	}
	if f.open.Load() {
		return store.Unavailable(errDegraded)
	}
	err := f.remote.Release(ctx, lease, now)
	if errors.Is(err, store.ErrUnavailable) {
		f.failed(err)
	}
	return err
}

// Reset forgets key of limit id on the remote and in the local store of
// this instance's share, so that the key is fresh whichever decides it
// next. An error from the remote is returned after the local reset; one
// matching errors.ErrUnsupported when the remote is no store.Resetter.
func (f *Store) Reset(ctx context.Context, id store.LimitID, key string) error {
	if !f.known(f.load(), id) {
		return fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	if l := f.local.Load(); l != nil {
		_ = l.mem.Reset(ctx, id, key) // the ids line up; a held place resets nothing
	}
	r, ok := f.remote.(store.Resetter)
	if !ok {
		return fmt.Errorf("store: %T cannot reset a key: %w", f.remote, errors.ErrUnsupported)
	}
	return r.Reset(ctx, id, key)
}

// Refund gives back req's hits remotely, and on the local store when this
// instance decided them there: the local store is asked while the breaker
// is open, the remote otherwise. Errors are store.Refunder's; one matching
// errors.ErrUnsupported when the remote is no store.Refunder.
func (f *Store) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	if err := store.CheckRefund(req, res); err != nil {
		return err
	}
	for i := range req.Hits[:req.N] {
		if !f.known(f.load(), req.Hits[i].Limit) {
			return fmt.Errorf("%w: hit %d names limit %d", store.ErrUnknownLimit, i, req.Hits[i].Limit)
		}
	}
	if f.open.Load() {
		return f.localFor().mem.Refund(ctx, req, res)
	}
	r, ok := f.remote.(store.Refunder)
	if !ok {
		return fmt.Errorf("store: %T cannot refund: %w", f.remote, errors.ErrUnsupported)
	}
	return r.Refund(ctx, req, res)
}
