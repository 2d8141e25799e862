package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/store"
)

// Lease limits of a Fallback's local decisions: bit 31 marks a lease of
// the local store, bits 24..30 the generation of that store (it is made
// anew when N changes), bits 0..23 the LimitID.
const (
	localBit    = store.LimitID(1) << 31
	genShift    = 24
	genMask     = 0x7f
	limitIDMask = store.LimitID(1)<<genShift - 1
)

// errDegraded is the cause of a Release refused while the breaker is open.
var errDegraded = errors.New("redisstore: degraded to local limits")

// Fallback is a store.Store that decides on a Redis Store while Redis
// answers and on a local store.Memory when it does not, with each limit
// divided among the live instances.
//
// A circuit breaker chooses. Closed, every call goes to Redis; each call
// that fails with store.ErrUnavailable (an error, a missed deadline) is
// decided locally instead, and WithTripAfter consecutive failures open the
// breaker. Open, decisions go straight to the local store, with no Redis
// latency added. A goroutine owned by the Fallback beats a heartbeat into
// Redis every probe interval; while the breaker is open the heartbeat is
// the probe, and WithRecoverAfter consecutive successes close it again.
//
// The local store enforces each instance's share: every limit (and a token
// bucket's rate) divided by N, rounded down, where N is the number of
// instances of the prefix that beat within the instance memory
// (WithInstanceMemory; a minute by default) and did not Close, or
// WithInstances' fixed N. So the service as a whole never exceeds its
// quota while Redis is down for every instance; see the package doc for
// the bound when it is down for some. While the breaker is open N does not
// change and the local store keeps what it counted, however few
// instances a Redis that comes back empty counts before this one closes
// its breaker. A limit whose share rounds to zero, and a limit marked
// WithFailClosed, rejects while degraded. Local decisions are made at
// Request.Now, so callers must fill it with their monotonic clock
// (internal/clock's Now) as for store.Memory; local state starts fresh
// when the breaker opens with an N other than the last local store's.
//
// Leases taken locally carry a Limit with bit 31 set; Release routes them
// to the local store (after the local store was made anew they are no
// longer held). Releasing a Redis lease while the breaker is open fails
// with store.ErrUnavailable: its permits come back at its expiry.
//
// Every mode change is counted in Stats and logged (WithLogger), one line
// per change, at most one a second. A Fallback is safe for concurrent use,
// by several Controllers too. Several Fallbacks may also wrap one Store:
// together they count as one instance in N, and each decides only the
// limits registered through it (others' LimitIDs are unknown to it, on
// Redis as locally).
// Close stops its goroutine. Use NewFallback; the zero value is not usable.
type Fallback struct {
	redis *Store
	cfg   fallbackConfig

	mu sync.Mutex // serializes Register, Unregister and local rebuilds
	// limits is copied on write, indexed by LimitID-1, as the Redis
	// store's and every local store's limits are.
	limits atomic.Pointer[[]fbLimit]
	local  atomic.Pointer[localStore]

	open       atomic.Bool
	episode    atomic.Uint64 // incremented as the breaker opens
	failures   atomic.Int64  // consecutive failed Redis calls
	instances  atomic.Int64  // N, frozen while the breaker is open
	fallbacks  atomic.Uint64
	errs       atomic.Uint64
	trips      atomic.Uint64
	recoveries atomic.Uint64

	logMu   sync.Mutex
	lastLog time.Time
	pending *logLine
	changes int // mode changes the pending line covers

	// okProbes counts the successful probes in a row while the breaker
	// is open; the heartbeat goroutine owns it.
	okProbes int

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ store.Store   = (*Fallback)(nil)
	_ store.Updater = (*Fallback)(nil)
)

// fbLimit is a registered limit of a Fallback; gone once unregistered.
type fbLimit struct {
	spec       store.Spec
	failClosed bool
	gone       bool
}

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

// FallbackStats is a snapshot of a Fallback's mode and counters.
type FallbackStats struct {
	// Degraded reports that the breaker is open: decisions are local.
	Degraded bool
	// Instances is N, the number of instances sharing each limit, and
	// Share its inverse: the fraction of each limit this instance enforces
	// while degraded.
	Instances int64
	Share     float64
	// FallbackDecisions counts decisions made locally.
	FallbackDecisions uint64
	// RedisErrors counts Redis calls that failed with store.ErrUnavailable
	// (decisions, releases and heartbeats).
	RedisErrors uint64
	// Trips and Recoveries count the breaker's openings and closings.
	Trips, Recoveries uint64
}

// NewFallback returns a Fallback around s and starts its heartbeat
// goroutine (stop it with Close). It beats once before returning, within
// s's deadline, to learn N; when that fails, N starts at WithInstances' n
// or 1 (the whole limit per instance until a heartbeat answers) and the
// breaker counts one failure.
func NewFallback(s *Store, opts ...FallbackOption) (*Fallback, error) {
	if s == nil {
		return nil, fmt.Errorf("redisstore: nil store")
	}
	cfg := fallbackConfig{tripAfter: DefaultTripAfter, recoverAfter: DefaultRecoverAfter, probe: DefaultProbeInterval}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("redisstore: nil FallbackOption")
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
		return nil, fmt.Errorf("redisstore: instance memory %v must be at least three probe intervals (%v), or live instances drop out of N between their heartbeats", cfg.memory, 3*cfg.probe)
	}
	f := &Fallback{redis: s, cfg: cfg, done: make(chan struct{})}
	s.fallbacks.Add(1)
	f.instances.Store(max(1, cfg.instances))
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.tick(ctx)
	go f.loop(ctx)
	return f, nil
}

// Close stops the heartbeat goroutine and, when it is the last open
// Fallback of its Store, removes this instance from the heartbeat set
// (within the store's deadline, best effort). Decisions still work after
// Close, but an open breaker no longer closes. Close is idempotent and
// returns nil.
func (f *Fallback) Close() error {
	f.closeOnce.Do(func() {
		f.cancel()
		<-f.done
		if f.redis.fallbacks.Add(-1) == 0 {
			_, _ = f.beat(context.Background(), false)
		}
	})
	return nil
}

// Stats returns a snapshot of the mode and counters.
func (f *Fallback) Stats() FallbackStats {
	n, open := f.instances.Load(), f.open.Load()
	if l := f.local.Load(); open && l != nil && l.episode == f.episode.Load() {
		n = l.n // the N this degraded spell decides on
	}
	return FallbackStats{
		Degraded:          open,
		Instances:         n,
		Share:             1 / float64(n),
		FallbackDecisions: f.fallbacks.Load(),
		RedisErrors:       f.errs.Load(),
		Trips:             f.trips.Load(),
		Recoveries:        f.recoveries.Load(),
	}
}

// Health reports Stats as a store.Health, for shed's Stats and its metrics.
func (f *Fallback) Health() store.Health {
	s := f.Stats()
	return store.Health{
		Degraded:          s.Degraded,
		Instances:         s.Instances,
		Share:             s.Share,
		FallbackDecisions: s.FallbackDecisions,
		BackendErrors:     s.RedisErrors,
		Trips:             s.Trips,
		Recoveries:        s.Recoveries,
	}
}

var _ store.HealthReporter = (*Fallback)(nil)

// Register registers spec with the Redis store (no I/O) and, while a
// local store exists, its share there. It returns the Store's errors.
//
// The LimitID is the Store's. Several Fallbacks may wrap one Store (and
// the Store may be used directly too): each knows only the limits
// registered through it, under the Store's IDs, and holds the places of
// the others' IDs in its local store, so that the IDs line up there.
func (f *Fallback) Register(ctx context.Context, spec store.Spec) (store.LimitID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.redis.load()) >= int(limitIDMask) {
		return 0, fmt.Errorf("store: too many limits for a fallback store")
	}
	id, err := f.redis.Register(ctx, spec)
	if err != nil {
		return 0, err
	}
	// The Store's IDs grow by one per Register: those since the last of
	// ours are other users' of the Store.
	next := slices.Clip(f.load())
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

// Update changes limit id in place on Redis (Store.Update) and its share
// in the local store, so that decisions keep their usage in either mode:
// the local share is updated in place too (Memory keeps its keys' usage)
// while the share stays above zero. When the share cannot change in place
// (it rounds to zero, or rounded to zero before), the local store is built
// anew, what it had counted lost: that matters only while Redis is down.
// Errors are Store.Update's.
func (f *Fallback) Update(ctx context.Context, id store.LimitID, spec store.Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.load()
	if !f.known(old, id) {
		return fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	if err := f.redis.Update(ctx, id, spec); err != nil {
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

// holdPlace takes the next LimitID of m and frees it at once: the place of
// a limit that is gone or not this Fallback's, a one-key table. Its name
// is one that no limit of m holds (a limit may take any name), so the
// Register cannot fail and the IDs stay in line.
func holdPlace(m *store.Memory) {
	spec := store.Spec{Algorithm: store.FixedWindow, Limit: 1, Window: time.Second, Capacity: 1}
	for i := 0; ; i++ {
		spec.Name = "redisstore: held place " + strconv.Itoa(i)
		if id, err := m.Register(context.Background(), spec); err == nil {
			_ = m.Unregister(context.Background(), id)
			return
		}
	}
}

// Unregister drops limit id from the Redis store and the local one, which
// share LimitIDs (no I/O; see Store.Unregister). It returns an error
// matching store.ErrUnknownLimit when id is not registered.
func (f *Fallback) Unregister(ctx context.Context, id store.LimitID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.load()
	if !f.known(old, id) {
		return fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	if err := f.redis.Unregister(ctx, id); err != nil {
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
func (f *Fallback) known(limits []fbLimit, id store.LimitID) bool {
	return id != 0 && int(id) <= len(limits) && !limits[id-1].gone
}

func (f *Fallback) load() []fbLimit {
	if p := f.limits.Load(); p != nil {
		return *p
	}
	return nil
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
	// Spec passed the Store's validation, so Memory takes it.
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
		share.Rate = concurrency.Rate{Count: spec.Rate.Count, Per: spec.Rate.Per * time.Duration(n)}
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
func (f *Fallback) localFor() *localStore {
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
func (f *Fallback) buildLocal(l *localStore, n int64, ep uint64) *localStore {
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
func (f *Fallback) current(l *localStore) bool {
	if f.open.Load() {
		return l.episode == f.episode.Load()
	}
	return l.n == f.instances.Load()
}

// Decide decides req on Redis while the breaker is closed and locally,
// on this instance's share, while it is open or when the Redis call fails
// with store.ErrUnavailable (see Fallback). It returns bad input's errors
// and the caller's ctx.Err(); never store.ErrUnavailable.
func (f *Fallback) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	if err := f.check(req, res); err != nil {
		return err
	}
	if !f.open.Load() {
		err := f.redis.Decide(ctx, req, res)
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

// check returns req.Check's error when req is malformed, and an error
// matching store.ErrUnknownLimit when a hit names a limit not registered
// through this Fallback (another Fallback's of the same Store, say), so
// that a decision is the same on Redis and locally.
func (f *Fallback) check(req *store.Request, res *store.Result) error {
	if req == nil || res == nil {
		return fmt.Errorf("store: Decide needs a request and a result")
	}
	if err := req.Check(); err != nil {
		return err
	}
	if err := f.redis.checkTags(req); err != nil {
		return err
	}
	limits := f.load()
	for i := range req.Hits[:req.N] {
		if id := req.Hits[i].Limit; !f.known(limits, id) {
			return fmt.Errorf("%w: hit %d names limit %d", store.ErrUnknownLimit, i, id)
		}
	}
	return nil
}

// failed counts a failed Redis call and opens the breaker at the
// threshold.
func (f *Fallback) failed(err error) {
	f.errs.Add(1)
	if f.failures.Add(1) < int64(f.cfg.tripAfter) || f.open.Load() {
		return
	}
	// A new opening before the breaker opens: a decision that sees it
	// open makes or claims the local store of this opening.
	f.episode.Add(1)
	if f.open.CompareAndSwap(false, true) {
		f.trips.Add(1)
		f.logChange("redisstore: Redis unavailable, deciding on local limits",
			slog.String("cause", err.Error()), slog.Int64("instances", f.instances.Load()),
			slog.Float64("share", 1/float64(f.instances.Load())))
	}
}

func (f *Fallback) decideLocal(ctx context.Context, req *store.Request, res *store.Result) error {
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
func (f *Fallback) rejectAt(ctx context.Context, l *localStore, req *store.Request, res *store.Result, j int) error {
	if j > 0 {
		peek := store.Request{Now: req.Now, N: j}
		for i := range j {
			peek.Hits[i] = store.Hit{Limit: req.Hits[i].Limit, Key: req.Hits[i].Key}
		}
		if err := l.mem.Decide(ctx, &peek, res); err != nil {
			return err
		}
	}
	res.Hits[j] = store.HitResult{Decision: concurrency.Decision{
		Limit:      f.load()[req.Hits[j].Limit-1].spec.Limit,
		RetryAfter: f.cfg.probe,
		ResetAfter: f.cfg.probe,
	}}
	res.Allowed, res.Decider, res.N, res.Now = false, j, j+1, req.Now
	return nil
}

// Release releases a local lease locally and a Redis lease on Redis
// (while the breaker is open, it fails with store.ErrUnavailable at once:
// the lease lapses at its expiry). Errors as store.Store's.
func (f *Fallback) Release(ctx context.Context, lease store.Lease, now int64) error {
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
	err := f.redis.Release(ctx, lease, now)
	if errors.Is(err, store.ErrUnavailable) {
		f.failed(err)
	}
	return err
}

// loop beats every probe interval until Close.
func (f *Fallback) loop(ctx context.Context) {
	defer close(f.done)
	t := time.NewTicker(f.cfg.probe)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.flushLog()
		f.tick(ctx)
	}
}

// tick beats once and hands the outcome to heard, unless the Fallback is
// closing.
func (f *Fallback) tick(ctx context.Context) {
	n, err := f.beat(ctx, true)
	if err != nil && ctx.Err() != nil {
		return
	}
	f.heard(n, err)
}

// heard takes a heartbeat's outcome: n instances counted, or err. A
// failure counts toward opening the breaker. While the breaker is closed,
// a success sets N to n. While it is open, N stays as it was: a Redis
// that came back empty, or answers only some probes, counts fewer
// instances than there are until every one has beaten again. The success
// counts toward closing the breaker, and the closing probe may raise N but
// not lower it (the next one may). It runs on the heartbeat goroutine.
func (f *Fallback) heard(n int64, err error) {
	if err != nil {
		f.okProbes = 0
		if f.open.Load() {
			f.errs.Add(1)
		} else {
			f.failed(err)
		}
		return
	}
	learn := f.cfg.instances == 0 && n > 0
	if !f.open.Load() {
		f.okProbes = 0
		if learn {
			f.instances.Store(n)
		}
		return
	}
	if f.okProbes++; f.okProbes < f.cfg.recoverAfter {
		return
	}
	f.okProbes = 0
	if learn && n > f.instances.Load() {
		f.instances.Store(n)
	}
	if f.open.CompareAndSwap(true, false) {
		f.failures.Store(0)
		f.recoveries.Add(1)
		f.logChange("redisstore: Redis answers again, deciding on Redis",
			slog.Int64("instances", f.instances.Load()))
	}
}

// beat runs the heartbeat script: join (or refresh) and count, or leave.
func (f *Fallback) beat(ctx context.Context, join bool) (int64, error) {
	live := f.cfg.memory / time.Microsecond
	flag := "1"
	if !join {
		flag = "0"
	}
	vals, err := f.redis.run(ctx, &f.redis.heartbeat, []string{f.redis.instancesKey()}, []any{f.redis.instance, int64(live), flag})
	if err != nil {
		return 0, err
	}
	return replyInt(vals, 2)
}

// logEvery is the least time between two log lines of mode changes.
const logEvery = time.Second

// logLine is a mode change waiting for its log line.
type logLine struct {
	msg   string
	attrs []slog.Attr
}

// logChange logs a mode change, at most one line every logEvery. A change
// within logEvery of the last line is held back and logged by the
// goroutine once logEvery has passed, with the number of changes the line
// covers, so the log always ends with the current mode.
func (f *Fallback) logChange(msg string, attrs ...slog.Attr) {
	f.logMu.Lock()
	f.pending = &logLine{msg: msg, attrs: attrs}
	f.changes++
	f.logMu.Unlock()
	f.flushLog()
}

// flushLog writes the pending line when logEvery has passed since the
// last one.
func (f *Fallback) flushLog() {
	f.logMu.Lock()
	now := time.Now()
	p := f.pending
	if p == nil || (!f.lastLog.IsZero() && now.Sub(f.lastLog) < logEvery) {
		f.logMu.Unlock()
		return
	}
	attrs := p.attrs
	if f.changes > 1 {
		attrs = append(slices.Clip(attrs), slog.Int("changes", f.changes))
	}
	f.pending, f.changes, f.lastLog = nil, 0, now
	f.logMu.Unlock()
	f.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, p.msg, attrs...)
}
