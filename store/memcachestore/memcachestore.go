package memcachestore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// Store is a store.Store on Memcached, through a *memcache.Client that the
// caller owns, for fixed-window limits only: one counter per key and
// window, counted with memcached's atomic incr.
//
// A hit of cost c on window w of a key is one incr of the counter
// prefix:<hash of limit and key>:w by c (or, for the window's first
// request, an add of it, expiring two windows later); the hit is admitted
// when the value incr returns is at most the limit. A rejected hit takes
// its own c back (decr), and so do the hits before it in the request,
// before Decide returns: all or nothing, without a multi-key transaction.
// See the package doc for what that means for exactness.
//
// Windows are placed by the spec's store.Calendar on Request.Now, the
// caller's clock (memcached has no clock a client can read): the instances
// sharing a limit must keep their clocks in step (NTP).
//
// A Store is safe for concurrent use. It has no goroutine and nothing to
// close; the client stays the caller's, and its Timeout is the deadline of
// each round trip. Use New; the zero value is not usable.
type Store struct {
	client *memcache.Client
	prefix string

	limits store.Registry[limit]
	seen   witnesses

	evictions, givenBack, giveBackFailed, undoneHits atomic.Uint64
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Updater  = (*Store)(nil)
	_ store.Resetter = (*Store)(nil)
	_ store.Refunder = (*Store)(nil)
)

// limit is a registered fixed window.
type limit struct {
	spec  store.Spec
	clock store.WindowClock
	span  int64 // the window on the window clock, ns
	// ttl is the counters' expiry in seconds: two windows, rounded up.
	ttl int64
}

// DefaultPrefix is the prefix of a Store's keys unless WithPrefix names
// another.
const DefaultPrefix = "sluice"

// maxPrefix keeps a key (prefix, a 22-byte hash, a window index and a
// suffix) within memcached's 250 bytes.
const maxPrefix = 200

// Option configures New.
type Option interface{ apply(*Store) error }

type prefixOption string

func (o prefixOption) apply(s *Store) error {
	if o == "" || len(o) > maxPrefix {
		return fmt.Errorf("memcachestore: prefix %q must be 1 to %d bytes", string(o), maxPrefix)
	}
	for i := 0; i < len(o); i++ {
		if o[i] <= ' ' || o[i] == 0x7f {
			return fmt.Errorf("memcachestore: prefix %q holds a space or a control byte, which memcached keys cannot", string(o))
		}
	}
	s.prefix = string(o)
	return nil
}

// WithPrefix sets the prefix of the store's keys (DefaultPrefix by
// default). Stores of one prefix share their limits' state: give each
// deployment its own. It must be 1 to 200 bytes without spaces or control
// bytes.
func WithPrefix(prefix string) Option { return prefixOption(prefix) }

// New returns a Store on client. It does no I/O. It returns an error for a
// nil client or a bad option.
func New(client *memcache.Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("memcachestore: nil client")
	}
	s := &Store{client: client, prefix: DefaultPrefix}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("memcachestore: nil Option")
		}
		if err := o.apply(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Stats counts what the store did besides deciding.
type Stats struct {
	// Evictions counts the counters found evicted: a window's counter
	// created a second time within its window (its marker, written when
	// it was first created, was still there). Each one may have admitted
	// up to a whole limit more in its window. A lower bound: an eviction
	// that took the marker too goes unseen.
	Evictions uint64
	// UndoneHits counts hits to give back because they or a later hit of
	// the request rejected, or the request failed part-way; GivenBack
	// counts those given back, and GiveBackFailed those that were not (a
	// decrement failed, or the server had failed: their units stay counted
	// until the window ends, fewer admissions, never more).
	UndoneHits, GivenBack, GiveBackFailed uint64
}

// Stats returns a snapshot of the counters. It is safe for concurrent use
// and cheap.
func (s *Store) Stats() Stats {
	return Stats{
		Evictions:      s.evictions.Load(),
		UndoneHits:     s.undoneHits.Load(),
		GivenBack:      s.givenBack.Load(),
		GiveBackFailed: s.giveBackFailed.Load(),
	}
}

// monthTTL is memcached's longest relative expiry: a longer one is read as
// a Unix time.
const monthTTL = 30 * 24 * 3600

// Register validates spec and adds it, without I/O. Besides
// store.Spec.Validate's checks it rejects every algorithm but
// store.FixedWindow: memcached has no scripting and no atomic multi-key
// operation, so only a counter that one incr decides is exact there.
// Errors start with "store: ".
func (s *Store) Register(_ context.Context, spec store.Spec) (store.LimitID, error) {
	l, err := newLimit(spec)
	if err != nil {
		return 0, err
	}
	return s.limits.Add(spec.Name, l)
}

func newLimit(spec store.Spec) (*limit, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Algorithm != store.FixedWindow {
		return nil, fmt.Errorf("store: limit %q: the Memcached store keeps fixed windows only, not %v: memcached has no scripting and no atomic multi-key operation, so only a window counter decided by one incr is exact there; use redisstore or store.Memory for it", spec.Name, spec.Algorithm)
	}
	c := spec.Calendar.Clock(spec.Window)
	span := int64(c.Span())
	return &limit{spec: spec, clock: c, span: span, ttl: (2*span + int64(time.Second) - 1) / int64(time.Second)}, nil
}

// Update changes limit id's Limit in place (store.Updater), without I/O:
// the counters keep their counts (a key over a lowered limit is admitted
// nothing until its window ends). Anything else that changes is an error
// (store.CheckInPlace), the limit unchanged, and so is an id not
// registered (matching store.ErrUnknownLimit).
func (s *Store) Update(_ context.Context, id store.LimitID, spec store.Spec) error {
	l, err := newLimit(spec)
	if err != nil {
		return err
	}
	return s.limits.Replace(id, l, func(old *limit) error { return store.CheckInPlace(old.spec, spec, "Memcached") })
}

// Unregister drops limit id, without I/O (see store.Store); its counters
// expire by themselves.
func (s *Store) Unregister(_ context.Context, id store.LimitID) error {
	return s.limits.Remove(id, func(l *limit) string { return l.spec.Name })
}

// Release returns an error: the Memcached store holds no leases (see
// store.Registry.ReleaseNone). It does no I/O.
func (s *Store) Release(_ context.Context, lease store.Lease, _ int64) error {
	return s.limits.ReleaseNone(lease)
}

// counterKey returns the key of l's counter for key in window idx:
// prefix:<22 bytes of base64url SHA-256 of the name and key>:idx, so that
// any bytes are a key and every key fits memcached's rules.
func (s *Store) counterKey(l *limit, key string, idx int64) (string, uint64) {
	h := sha256.New()
	var n [8]byte
	h.Write(strconv.AppendInt(n[:0], int64(len(l.spec.Name)), 10))
	h.Write([]byte{':'})
	h.Write([]byte(l.spec.Name))
	h.Write([]byte(key))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	var b strings.Builder
	b.Grow(len(s.prefix) + 1 + 22 + 1 + 20)
	b.WriteString(s.prefix)
	b.WriteByte(':')
	var enc [32]byte
	base64.RawURLEncoding.Encode(enc[:], sum[:16]) // 128 bits: 22 characters
	b.Write(enc[:22])
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(idx, 10))
	return b.String(), binary.LittleEndian.Uint64(sum[16:]) ^ uint64(idx)*0x9e3779b97f4a7c15
}

// markerSuffix names a counter's marker: written when the counter is
// created, it says that the window had a counter already.
const markerSuffix = ":m"

// Decide charges req's hits, all or nothing, at req.Now (see store.Store
// and the package doc). It returns an error, charging nothing, when req is
// malformed or names a limit this store does not hold (matching
// store.ErrUnknownLimit); the caller's ctx.Err() when ctx has ended before
// a round trip (what the request had charged is given back first); and an
// error matching store.ErrUnavailable when memcached fails (what the
// request had charged then stays counted: no more round trips to a failing
// server). It blocks for one round trip per hit in the common case, and
// more on a window's first request (add and marker) or a rejection (decr
// per hit given back).
func (s *Store) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	if req == nil || res == nil {
		return errors.New("store: Decide needs a request and a result")
	}
	if err := req.Check(); err != nil {
		return err
	}
	if req.Now < 0 {
		return fmt.Errorf("store: request time %d is negative", req.Now)
	}
	if err := store.RefuseReserve(req, "memcachestore"); err != nil {
		return err // it decides at once only
	}
	ls := s.limits.All()
	var lim [store.MaxHits]*limit
	for i := range req.Hits[:req.N] {
		h := &req.Hits[i]
		if int(h.Limit) > len(ls) || ls[h.Limit-1] == nil {
			return fmt.Errorf("%w: hit %d names limit %d", store.ErrUnknownLimit, i, h.Limit)
		}
		lim[i] = ls[h.Limit-1]
	}
	var keys [store.MaxHits]string
	var tags [store.MaxHits]uint64
	res.Now, res.Allowed, res.Decider, res.N = req.Now, true, 0, 0
	for i := range req.Hits[:req.N] {
		h, l := &req.Hits[i], lim[i]
		if err := ctx.Err(); err != nil {
			s.giveBack(req, &keys, i)
			return err
		}
		at := l.clock.At(req.Now)
		idx := at / l.span
		end := (idx + 1) * l.span
		keys[i], tags[i] = s.counterKey(l, h.Key, idx)
		seen := s.seen.before(tags[i])
		d := ratelimit.Decision{Limit: l.spec.Limit}
		var count int64 // the count before this hit
		var err error
		gaveUp := false
		switch {
		case h.Cost > l.spec.Limit || h.Cost == 0:
			if count, err = s.read(keys[i]); err == nil && s.seen.lost(seen, count, 0) {
				s.evictions.Add(1)
			}
			if h.Cost > 0 {
				d.RetryAfter = ratelimit.Never
			}
		default:
			var v int64
			var marked bool
			v, marked, err = s.incr(keys[i], h.Cost, l.ttl)
			count = v - h.Cost
			if err == nil && (s.seen.lost(seen, v, h.Cost) || marked) {
				s.evictions.Add(1)
			}
			if err == nil && v > l.spec.Limit {
				if !s.giveBackOne(keys[i], h.Cost) {
					s.gaveUp(req, i) // the server failed: no more round trips
					gaveUp = true
				}
				d.RetryAfter = time.Duration(end - at)
			} else if err == nil {
				count = v
			}
		}
		if err != nil {
			// The server failed: giving back would cost a Timeout per hit.
			// What the hits before charged stays counted (fewer
			// admissions, never more).
			s.gaveUp(req, i)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return store.Unavailable(err)
		}
		d.Remaining = max(0, l.spec.Limit-count)
		if count > 0 {
			d.ResetAfter = time.Duration(end - at)
		}
		d = l.clock.Decision(req.Now, at, d)
		res.Hits[i] = store.HitResult{Decision: d}
		res.N = i + 1
		if !d.Allowed() {
			if !gaveUp {
				s.giveBack(req, &keys, i)
			}
			res.Allowed, res.Decider = false, i
			return nil
		}
		if d.Remaining < res.Hits[res.Decider].Decision.Remaining {
			res.Decider = i
		}
	}
	for i := range req.Hits[:req.N] {
		if c := req.Hits[i].Cost; c > 0 {
			s.seen.admitted(tags[i], c)
		}
	}
	return nil
}

// read returns a counter's value, 0 when it has none.
func (s *Store) read(key string) (int64, error) {
	it, err := s.client.Get(key)
	if errors.Is(err, memcache.ErrCacheMiss) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return parseCount(it.Value)
}

// parseCount reads a counter's value; decr may have left trailing spaces.
func parseCount(b []byte) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memcachestore: a counter holds %q, not a count", b)
	}
	return v, nil
}

// incr adds cost to a counter and returns its new value: incr, or for a
// window's first request add (expiring after ttl seconds) with its marker;
// when another request added the counter in between, incr again. marked
// reports that the counter was made anew although the window's marker
// was there: it had been evicted.
func (s *Store) incr(key string, cost, ttl int64) (v int64, marked bool, err error) {
	for range 2 {
		v, err := s.client.Increment(key, uint64(cost))
		if err == nil {
			return int64(v), false, nil
		}
		if !errors.Is(err, memcache.ErrCacheMiss) {
			return 0, false, err
		}
		exp := expiry(ttl)
		err = s.client.Add(&memcache.Item{Key: key, Value: strconv.AppendInt(nil, cost, 10), Expiration: exp})
		if errors.Is(err, memcache.ErrNotStored) {
			continue // another request created it: count on it
		}
		if err != nil {
			return 0, false, err
		}
		// This request created the window's counter. Its marker says so;
		// a marker there already means the counter was created before in
		// this window, and is gone: evicted. (A marker that failed
		// otherwise only loses a detection.)
		err = s.client.Add(&memcache.Item{Key: key + markerSuffix, Value: []byte{'1'}, Expiration: exp})
		return cost, errors.Is(err, memcache.ErrNotStored), nil
	}
	return 0, false, errors.New("memcachestore: a counter vanished twice during one increment")
}

// expiry is memcached's Expiration for ttl seconds from now: relative up
// to 30 days, a Unix time beyond (the wall clock: memcached's expiry is in
// real time, whatever the request's clock).
func expiry(ttl int64) int32 {
	if ttl <= monthTTL {
		return int32(ttl)
	}
	return int32(min(time.Now().Unix()+ttl, 1<<31-1))
}

// giveBack gives back the charges of hits [0, upto) of req, whose counters
// are keys: the hits before one that rejected, or whose context ended. At
// the first decrement that fails it stops (the server is failing: each
// more would cost a Timeout) and counts the rest as failed.
func (s *Store) giveBack(req *store.Request, keys *[store.MaxHits]string, upto int) {
	for j := range upto {
		if c := req.Hits[j].Cost; c > 0 && keys[j] != "" && !s.giveBackOne(keys[j], c) {
			s.gaveUp(req, j)
			return
		}
	}
}

// gaveUp counts the charges of hits [0, upto) of req as not given back.
func (s *Store) gaveUp(req *store.Request, upto int) {
	for j := range upto {
		if req.Hits[j].Cost > 0 {
			s.undoneHits.Add(1)
			s.giveBackFailed.Add(1)
		}
	}
}

// giveBackOne decrements a counter by cost, counting it, and reports
// whether memcached answered.
func (s *Store) giveBackOne(key string, cost int64) bool {
	s.undoneHits.Add(1)
	if _, err := s.client.Decrement(key, uint64(cost)); err != nil && !errors.Is(err, memcache.ErrCacheMiss) {
		s.giveBackFailed.Add(1)
		return false
	}
	s.givenBack.Add(1)
	return true
}

// Refund gives back each hit's Cost on the counter of the window it was
// admitted in (res.Now), when req.Now still lies in that window
// (store.Refunder); a window that has passed is not given back. A counter
// never goes below zero. It returns an error matching
// store.ErrUnknownLimit for a limit not registered, ErrUnavailable
// (wrapped) when memcached fails, and an error for a malformed req or a res
// that did not admit it.
func (s *Store) Refund(_ context.Context, req *store.Request, res *store.Result) error {
	if err := store.CheckRefund(req, res); err != nil {
		return err
	}
	for i := range req.Hits[:req.N] {
		h := &req.Hits[i]
		l := s.limits.Lookup(h.Limit)
		if l == nil {
			return fmt.Errorf("%w: hit %d names limit %d", store.ErrUnknownLimit, i, h.Limit)
		}
		idx := l.clock.At(res.Now) / l.span
		if h.Cost == 0 || l.clock.At(max(0, req.Now))/l.span != idx {
			continue
		}
		key, tag := s.counterKey(l, h.Key, idx)
		s.seen.gaveBack(tag, h.Cost)
		if _, err := s.client.Decrement(key, uint64(h.Cost)); err != nil && !errors.Is(err, memcache.ErrCacheMiss) {
			return store.Unavailable(err)
		}
	}
	return nil
}

// Reset forgets key of limit id in the current window (store.Resetter):
// ResetAt at the process's clock (internal clock.Now, the clock callers
// fill Request.Now with).
func (s *Store) Reset(ctx context.Context, id store.LimitID, key string) error {
	return s.ResetAt(ctx, id, key, clock.Now())
}

// ResetAt deletes key's counter of limit id for the window of now, and its
// marker (so that the counter made anew is not taken for an eviction): the
// pardon of a client. A decision racing with it is counted before or after
// it. Windows other than now's keep their counts (a past window's no
// longer matter). It returns an error matching store.ErrUnknownLimit for
// an id not registered, and ErrUnavailable (wrapped) when memcached fails.
func (s *Store) ResetAt(_ context.Context, id store.LimitID, key string, now int64) error {
	l := s.limits.Lookup(id)
	if l == nil {
		return fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	k, tag := s.counterKey(l, key, l.clock.At(max(0, now))/l.span)
	s.seen.gaveBack(tag, -1)
	for _, del := range []string{k + markerSuffix, k} { // the marker first: see ResetAt
		if err := s.client.Delete(del); err != nil && !errors.Is(err, memcache.ErrCacheMiss) {
			return store.Unavailable(err)
		}
	}
	return nil
}
