package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/membership"
)

// Store is a store.Store on Redis, a Redis Sentinel setup or Redis
// Cluster (7.0 or later), through the go-redis client the caller already
// has.
//
// Decide runs one Lua script, one round trip: the script reads the
// server's TIME, evaluates every hit of the request in order on that one
// instant and writes nothing unless all are admitted, so several limits are
// all-or-nothing exactly and instances with different clocks share one
// timeline. Every algorithm of store.Memory is there with the same
// decisions (see the package doc for the resolution). Every key the
// script writes gets its TTL in the same script.
//
// Calls run with a per-call deadline (WithTimeout, DefaultTimeout by
// default) and are never retried by go-redis: a lost reply fails the call
// with store.ErrUnavailable rather than risk charging twice. Register and
// Unregister are local (no I/O): they keep each spec's parameters for the
// script.
//
// A Store is safe for concurrent use. It has no goroutine and nothing to
// close; the client stays the caller's. Use New; the zero value is not
// usable.
type Store struct {
	client  redis.UniversalClient
	cluster *redis.ClusterClient // client, when it is one
	tag     string               // "{prefix}", the hash tag of every key
	prefix  string
	keyTags bool // WithKeyTags: keys with tags of their own use {prefix:tag}
	timeout time.Duration

	decide, release, heartbeat, exchange script

	// instance is this Store's id in the heartbeat set: the Fallbacks
	// around one Store are one instance, which leaves the set when the
	// last of them Closes (fallbacks, that one instance).
	instance  string
	fallbacks *membership.Instance

	limits store.Registry[limit] // by LimitID, with the names in use
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Updater = (*Store)(nil)
)

// limit is a registered spec with its script arguments.
type limit struct {
	spec  store.Spec
	alg   int   // the script's algorithm number
	param int64 // interval in ns (token bucket), window or TTL in µs
	// shift (µs) and months place a fixed or sliding window on its
	// calendar (store.WindowClock); zero for the other algorithms.
	shift  int64
	months int
	kind   byte
	// unit converts the script's durations to nanoseconds.
	unit time.Duration
	// args are alg, Limit, param, shift and months boxed once, so that a
	// decision does not allocate for them.
	args [5]any
}

// New returns a Store deciding on client's server. The client must have
// ContextTimeoutEnabled set, so that the per-call deadline bounds the
// network I/O too (go-redis ignores context deadlines otherwise, and a hung
// server would hold each call for its ReadTimeout); New returns an error
// otherwise. Its MaxRetries does not matter: the store's scripts are never
// retried. Its DialerRetries (go-redis dials up to 5 times by default)
// makes a call to a server that refuses connections last until the
// deadline rather than fail at once; set it to 1 for the fastest failover
// to a Fallback's local limits. New does no I/O.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("redisstore: nil client")
	}
	cfg := config{prefix: DefaultPrefix, timeout: DefaultTimeout}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("redisstore: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	ctxTimeout := true
	var cluster *redis.ClusterClient
	switch c := client.(type) {
	case *redis.Client:
		ctxTimeout = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		ctxTimeout, cluster = c.Options().ContextTimeoutEnabled, c
	case *redis.Ring:
		ctxTimeout = c.Options().ContextTimeoutEnabled
	}
	if !ctxTimeout {
		return nil, fmt.Errorf("redisstore: the client must have ContextTimeoutEnabled: true, or a hung server holds each call for its ReadTimeout instead of the store's %v", cfg.timeout)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	s := &Store{
		instance:  hex.EncodeToString(id[:]),
		client:    client,
		cluster:   cluster,
		tag:       "{" + cfg.prefix + "}",
		prefix:    cfg.prefix,
		keyTags:   cfg.keyTags,
		timeout:   cfg.timeout,
		decide:    newScript(decideSrc),
		release:   newScript(releaseSrc),
		heartbeat: newScript(heartbeatSrc),
		exchange:  newScript(exchangeSrc),
	}
	s.fallbacks = membership.New("Redis", s.beat)
	return s, nil
}

// Register validates spec and adds it, without I/O. Besides
// store.Spec.Validate's checks it rejects windows and lease TTLs that are
// not whole microseconds (the resolution of Redis's TIME). Errors start
// with "store: ". Limits of the same Name in stores of the same prefix
// share their state in Redis: register the same spec everywhere.
func (s *Store) Register(_ context.Context, spec store.Spec) (store.LimitID, error) {
	l, err := newLimit(spec)
	if err != nil {
		return 0, err
	}
	return s.limits.Add(spec.Name, l)
}

// newLimit validates spec for the script and boxes its arguments.
func newLimit(spec store.Spec) (*limit, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	l := &limit{spec: spec, kind: kindOf(spec.Algorithm), unit: time.Microsecond}
	switch spec.Algorithm {
	case store.TokenBucket:
		l.alg, l.unit = 1, 1
		l.param = (int64(spec.Rate.Per) + spec.Rate.Count - 1) / spec.Rate.Count
	case store.FixedWindow, store.SlidingWindow, store.SlidingLog:
		l.alg = int(spec.Algorithm) // 2, 3, 4
		if spec.Window%time.Microsecond != 0 {
			return nil, fmt.Errorf("store: limit %q: the Redis store needs a window of whole microseconds, got %v", spec.Name, spec.Window)
		}
		l.param = int64(spec.Window / time.Microsecond)
		if spec.Algorithm != store.SlidingLog { // windows on the calendar's window clock
			k := spec.Calendar.Clock(spec.Window)
			l.param = int64(k.Span() / time.Microsecond)
			l.shift, l.months = int64(k.Shift()/time.Microsecond), k.Months()
		}
	case store.Concurrency:
		l.alg = 5
		if spec.LeaseTTL%time.Microsecond != 0 {
			return nil, fmt.Errorf("store: limit %q: the Redis store needs a lease TTL of whole microseconds, got %v", spec.Name, spec.LeaseTTL)
		}
		l.param = int64(spec.LeaseTTL / time.Microsecond)
	}
	l.args = [5]any{l.alg, spec.Limit, l.param, l.shift, l.months}
	return l, nil
}

// Update changes limit id's parameters in place (store.Updater), without
// I/O: the script gets the limit with every call, and reads each key's
// state in Redis under the new one. Windows keep their counts, a sliding
// log its admissions, a concurrency limit its leases (a key over a lowered
// limit is admitted nothing until it is under it), a token bucket its debt
// (in time: exact for a change of burst). A token bucket's rate cannot
// change in place here (its debt would change meaning, and every instance
// would have to agree on when): that is an error, so the caller registers a
// new limit. Also an error, the limit unchanged: an id not registered
// (matching store.ErrUnknownLimit), another Name, Algorithm, Window,
// Calendar, Capacity or Overflow. Other Stores of the prefix that share the
// name keep their own parameters until they are updated too.
func (s *Store) Update(_ context.Context, id store.LimitID, spec store.Spec) error {
	l, err := newLimit(spec)
	if err != nil {
		return err
	}
	return s.limits.Replace(id, l, func(old *limit) error { return store.CheckInPlace(old.spec, spec, "Redis") })
}

// Unregister drops limit id from this Store, without I/O (see
// store.Store): later calls naming id fail with store.ErrUnknownLimit, and
// its name may be registered again. Its keys in Redis are not deleted:
// every key the scripts write has a TTL and expires by itself, and other
// Stores of the prefix that registered the name share them. A limit
// registered again under the name meets that state until it expires. It
// returns an error matching store.ErrUnknownLimit when id is not
// registered.
func (s *Store) Unregister(_ context.Context, id store.LimitID) error {
	return s.limits.Remove(id, func(l *limit) string { return l.spec.Name })
}

func (s *Store) load() []*limit { return s.limits.All() }

func (s *Store) lookup(id store.LimitID) *limit { return s.limits.Lookup(id) }

// keys returns the state key of limit l for key and, for a concurrency
// limit, its metadata key (the state key again otherwise).
func (s *Store) keys(l *limit, key string) (string, string) {
	k := s.stateKey(l.kind, l.spec.Name, key)
	if l.spec.Algorithm != store.Concurrency {
		return k, k
	}
	return k, s.stateKey('m', l.spec.Name, key)
}

// Decide charges req's hits, all or nothing, in one script call on the
// server's clock (see store.Store). It ignores req.Now; res.Now is the
// server's time in Unix nanoseconds, at microsecond resolution, and lease
// expiries are on that clock. It returns an error, charging nothing, when
// req is malformed or names a limit this store does not hold (matching
// store.ErrUnknownLimit); the caller's ctx.Err() when ctx ends first; and
// an error matching store.ErrUnavailable when Redis fails or misses the
// store's deadline (a lost reply is not retried, so the request may or may
// not have been charged on the server). It blocks for one round trip.
func (s *Store) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	if req == nil || res == nil {
		return fmt.Errorf("store: Decide needs a request and a result")
	}
	if err := req.Check(); err != nil {
		return err
	}
	var lim [store.MaxHits]*limit
	keys, args, err := s.scriptArgs(req, req.N, nil, &lim)
	if err != nil {
		return err
	}
	vals, err := s.run(ctx, &s.decide, keys, args)
	if err != nil {
		return err
	}
	if err := parseDecision(vals, req, res, &lim); err != nil {
		return store.Unavailable(err)
	}
	return nil
}

// scriptArgs returns the keys and arguments of the decide script for req's
// hits, its first argument n (req.N to decide, -req.N to refund res), and
// the limits of the hits in lim. Each hit's wait argument is its max wait
// (deciding) or what its reservation left (refunding; "-" for none); a
// refund's last argument is the admission's instant, res.Now in Unix µs.
func (s *Store) scriptArgs(req *store.Request, n int, res *store.Result, lim *[store.MaxHits]*limit) ([]string, []any, error) {
	if err := s.checkTags(req); err != nil {
		return nil, nil, err
	}
	ls := s.load()
	hits := req.Hits[:req.N]
	keys := make([]string, 0, 2*req.N)
	args := make([]any, 0, 3+7*req.N)
	args = append(args, n)
	for i := range hits {
		h := &hits[i]
		if int(h.Limit) > len(ls) || ls[h.Limit-1] == nil {
			return nil, nil, fmt.Errorf("%w: hit %d names limit %d", store.ErrUnknownLimit, i, h.Limit)
		}
		l := ls[h.Limit-1]
		lim[i] = l
		if h.MaxWait > 0 {
			if err := store.CheckReserve(l.spec); err != nil {
				return nil, nil, fmt.Errorf("store: hit %d: %w", i, err)
			}
		}
		k, m := s.keys(l, h.Key)
		keys = append(keys, k, m)
		var wait any = int64(h.MaxWait)
		if res != nil {
			wait = "-"
			if r := res.Hits[i].Reserved; res.Hits[i].Wait > 0 && l.spec.Algorithm == store.TokenBucket {
				wait = strconv.FormatInt(r/1000, 10) + ":" + strconv.FormatInt(r%1000, 10)
			} else if res.Hits[i].Wait > 0 {
				wait = strconv.FormatInt(r, 10) // a fixed window's index
			}
		}
		shift := l.args[3]
		if res != nil && l.spec.Algorithm == store.TokenBucket {
			// A bucket's refund: its admission's ResetAfter in ns, so that
			// the script gives back only what is left of it.
			shift = int64(res.Hits[i].Decision.ResetAfter)
		}
		args = append(args, l.args[0], h.Cost, l.args[1], l.args[2], shift, l.args[4], wait)
	}
	args = append(args, int64(req.Wait))
	if res != nil {
		// A refund's windows are those of the admission: res.Now is the
		// server's TIME then, in Unix ns (µs on the script's side).
		args = append(args, res.Now/1000)
	}
	return keys, args, nil
}

// parseDecision fills res from the decide script's reply.
func parseDecision(vals []any, req *store.Request, res *store.Result, lim *[store.MaxHits]*limit) error {
	now, err := replyNow(vals)
	if err != nil {
		return err
	}
	n, err := replyInt(vals, 2)
	if err != nil || n < 1 || n > int64(req.N) || len(vals) != 3+6*int(n) {
		return errReply
	}
	res.Now, res.N, res.Decider, res.Allowed, res.Wait = now, int(n), 0, true, 0
	for i := range res.N {
		l, h := lim[i], &req.Hits[i]
		bucket := l.spec.Algorithm == store.TokenBucket
		var f [6]int64
		for j := range f {
			if f[j], err = replyInt(vals, 3+6*i+j); err != nil && (j != 5 || !bucket) {
				return err
			}
		}
		var wait time.Duration
		var reserved int64
		switch {
		case f[0] == 1 && f[3] > 0 && bucket:
			// A reservation: its wait, and the state it left ("u:r").
			if reserved, err = replyState(vals, 3+6*i+5); err != nil {
				return err
			}
			wait, f[3], f[5] = time.Duration(f[3]), 0, 0
		case err != nil:
			return err
		case f[0] == 1 && f[3] > 0 && l.spec.Algorithm == store.FixedWindow:
			// A reservation: its wait, and the window it counts in.
			wait, reserved, f[3], f[5] = time.Duration(f[3])*l.unit, f[5], 0, 0
		}
		d := ratelimit.Decision{
			Limit:      l.spec.Limit,
			Remaining:  f[2],
			ResetAfter: time.Duration(f[4]) * l.unit,
		}
		switch {
		case f[0] == 1:
			// Admitted: RetryAfter stays 0.
		case f[1] == 2:
			d.RetryAfter = ratelimit.Never
		default:
			// At least 1 ns: a rejection must not read as an admission
			// (Decision.Allowed is RetryAfter == 0), whatever the script
			// returned.
			d.RetryAfter = max(1, time.Duration(f[3])*l.unit)
		}
		out := &res.Hits[i]
		*out = store.HitResult{Decision: d, Wait: wait, Reserved: reserved}
		res.Wait = max(res.Wait, wait)
		if f[5] != 0 {
			out.Lease = store.Lease{Limit: h.Limit, Key: h.Key, ID: uint64(f[5]), Cost: h.Cost,
				Expires: now + int64(l.spec.LeaseTTL)}
		}
		if !d.Allowed() {
			if i != res.N-1 {
				return errReply
			}
			res.Allowed, res.Decider = false, i
		} else if d.Remaining < res.Hits[res.Decider].Decision.Remaining {
			res.Decider = i
		}
	}
	if res.Allowed && res.N != req.N {
		return errReply
	}
	if !res.Allowed {
		// A rejected request holds no lease nor reservation: the script
		// wrote nothing.
		res.Wait = 0
		for i := range res.N {
			res.Hits[i].Lease, res.Hits[i].Wait, res.Hits[i].Reserved = store.Lease{}, 0, 0
		}
	}
	return nil
}

// replyState returns the token bucket state "u:r" at vals[i] (µs since the
// script's epoch and a ns remainder) as one number of ns.
func replyState(vals []any, i int) (int64, error) {
	v, ok := vals[i].(string)
	if !ok {
		return 0, errReply
	}
	us, ns, ok := strings.Cut(v, ":")
	u, err1 := strconv.ParseInt(us, 10, 64)
	r, err2 := strconv.ParseInt(ns, 10, 64)
	if !ok || err1 != nil || err2 != nil || u < 0 || u > math.MaxInt64/1000-1 || r < 0 || r >= 1000 {
		return 0, errReply
	}
	return u*1000 + r, nil
}

// replyNow returns the server time of a script's reply in Unix ns.
func replyNow(vals []any) (int64, error) {
	sec, err := replyInt(vals, 0)
	if err != nil {
		return 0, err
	}
	usec, err := replyInt(vals, 1)
	if err != nil {
		return 0, err
	}
	return sec*int64(time.Second) + usec*int64(time.Microsecond), nil
}

// Release gives lease back, on the server's clock (it ignores now). It
// returns store.ErrLeaseNotHeld when the lease is not held (released
// already, expired, or not from a store of this prefix), an error when its
// limit is unknown (matching store.ErrUnknownLimit) or not a Concurrency
// limit, the caller's ctx.Err() when ctx ends first, and an error matching
// store.ErrUnavailable when Redis fails (the lease then lapses at its
// expiry). It blocks for one round trip.
func (s *Store) Release(ctx context.Context, lease store.Lease, _ int64) error {
	if !lease.Held() {
		return store.ErrLeaseNotHeld
	}
	l := s.lookup(lease.Limit)
	if l == nil {
		return fmt.Errorf("%w: lease names limit %d", store.ErrUnknownLimit, lease.Limit)
	}
	if l.spec.Algorithm != store.Concurrency {
		return fmt.Errorf("store: lease names limit %d, which is not a concurrency limit", lease.Limit)
	}
	if lease.Cost <= 0 {
		return store.ErrLeaseNotHeld
	}
	k, m := s.keys(l, lease.Key)
	member := strconv.FormatUint(lease.ID, 10) + ":" + strconv.FormatInt(lease.Cost, 10)
	vals, err := s.run(ctx, &s.release, []string{k, m}, []any{member})
	if err != nil {
		return err
	}
	held, err := replyInt(vals, 2)
	if err != nil {
		return store.Unavailable(err)
	}
	if held != 1 {
		return store.ErrLeaseNotHeld
	}
	return nil
}
