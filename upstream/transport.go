package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/queueing"
	"github.com/sluicehq/sluice/ratelimit"
)

// Errors a Transport returns without calling the upstream. Each is wrapped
// with detail; test for them with errors.Is.
var (
	// ErrDeadline: the request's context deadline falls before its
	// turn to be sent. The Transport fails it at once instead of sleeping
	// until the deadline.
	ErrDeadline = errors.New("upstream: request deadline falls before its turn")
	// ErrMaxWait: the request's turn is further away than the
	// Transport's max wait.
	ErrMaxWait = errors.New("upstream: turn is beyond the max wait")
	// ErrThrottled: adaptive client throttling rejected the request
	// locally, because the upstream rejected much of what was sent lately.
	ErrThrottled = errors.New("upstream: throttled locally (upstream rejects)")
)

// defaultKeys is the default capacity of the per-key table.
const defaultKeys = 1024

// defaultBlock is how long a 429 or 503 that says nothing about
// when to come back (no Retry-After, no exhausted quota) blocks its key.
const defaultBlock = time.Second

// Transport is an http.RoundTripper that makes a client a good citizen of
// the upstreams it calls. Per upstream key (the host, or a caller-chosen
// key) it:
//
//   - paces requests to the upstream's published limit times a reserve
//     (default 90%), as a pacer (no bursts) or, with WithBurst, as
//     a token bucket; waiting callers are served in turn order;
//   - learns from responses: a 429 or 503 with Retry-After (delta-seconds
//     or HTTP-date) blocks the key until then, and waiting callers wake at
//     that instant, not before (a 429 or 503 that says nothing about when
//     blocks the key for a second); the quotas the upstream reports
//     (X-RateLimit-Remaining/-Reset/-Limit, or the IETF RateLimit and
//     RateLimit-Policy fields) are enforced beside the local bucket, so the
//     upstream's view wins whenever it is stricter: a report of r left until
//     a reset in t lets at most r more go before t, less the reserved share
//     of the limit when the limit is reported, less every request sent
//     after the one that was answered (a report cannot know of them) and
//     every one sent before it that was still unanswered then (requests
//     sent at once reach the upstream in any order). This
//     reading is safe for fixed windows and token buckets alike; for an
//     upstream whose limit refills within a second and that reports 0 left
//     with a reset in whole seconds it is slow (the example in
//     examples/client paces without bursts, which keeps the report off 0);
//   - rejects locally with the SRE adaptive-throttling probability when the
//     upstream rejects much of what is sent (ErrThrottled);
//   - optionally caps the requests in flight.
//
// A request waits for its turn under its context: when the turn falls after
// the context's deadline (or beyond the max wait) RoundTrip fails at once
// with ErrDeadline (ErrMaxWait) and sends nothing; when the
// context ends while waiting it returns the context's error. In token-bucket
// mode the turn is exact; in pacer mode it is the pacer's slot.
//
// The state of at most WithKeys keys is kept (default 1,024), in a
// table that recycles only idle, fully recovered keys.
//
// Transport takes the time from internal/clock and blocks on timers, so it
// runs under testing/synctest. It starts no goroutine and needs no Close. It
// is safe for concurrent use. The zero value is not usable; call
// NewTransport.
type Transport struct {
	next    http.RoundTripper
	cfg     config
	gcra    *ratelimit.GCRA // token-bucket mode; nil in pacer mode
	pacerN  int64           // pacer mode: n slots per pacerP
	pacerP  time.Duration
	spacing int64 // pacer mode: the longest gap between slots, in ns
	keys    *concurrency.Table[keyState, *keyState]

	requests, sent, delayed, throttled, failedFast atomic.Int64
	rejected429, rejected503, waitNanos            atomic.Int64
}

// NewTransport returns a Transport that sends requests to next within limit,
// the upstream's published rate per key. It returns an error when next is
// nil, limit's count or period is not positive, an option is invalid, or
// the reserved rate is faster than one request per nanosecond.
func NewTransport(next http.RoundTripper, limit ratelimit.Rate, opts ...Option) (*Transport, error) {
	if next == nil {
		return nil, errors.New("upstream: transport needs a next RoundTripper")
	}
	if limit.Count <= 0 || limit.Per <= 0 {
		return nil, fmt.Errorf("upstream: transport limit must have a positive count and period, got %v", limit)
	}
	cfg := config{
		reserve:   0.9,
		keys:      defaultKeys,
		throttle:  true,
		k:         throttleDefaultK,
		maxReject: 1,
		random:    rand.Float64,
		key:       func(r *http.Request) string { return r.URL.Host },
	}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("upstream: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	// The reserve stretches the period: Count requests per Per/reserve.
	per := math.Ceil(float64(limit.Per) / cfg.reserve)
	if per > float64(math.MaxInt64/2) {
		return nil, fmt.Errorf("upstream: limit %v with reserve %v has too long a period", limit, cfg.reserve)
	}
	t := &Transport{next: next, cfg: cfg}
	reserved := ratelimit.Rate{Count: limit.Count, Per: time.Duration(per)}
	if cfg.burst > 0 {
		burst := max(1, int64(math.Floor(float64(cfg.burst)*cfg.reserve)))
		g, err := ratelimit.NewGCRA(reserved, burst)
		if err != nil {
			return nil, fmt.Errorf("upstream: %w", err)
		}
		t.gcra = g
	} else {
		if _, err := queueing.NewPacer(reserved.Count, reserved.Per); err != nil {
			return nil, fmt.Errorf("upstream: %w", err)
		}
		t.pacerN, t.pacerP = reserved.Count, reserved.Per
		t.spacing = (int64(reserved.Per) + reserved.Count - 1) / reserved.Count
	}
	keys, err := concurrency.NewTable[keyState](cfg.keys, func(k *keyState, now int64) bool {
		return k.recovered(now, t.gcra, t.spacing)
	}, concurrency.WithOverflow(concurrency.OverflowShare))
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	t.keys = keys
	return t, nil
}

// Stats is a snapshot of a Transport's counters since it was made.
type Stats struct {
	// Requests counts calls to RoundTrip.
	Requests int64
	// Sent counts requests passed to the upstream.
	Sent int64
	// Delayed counts sent requests that waited for their turn; Waited is
	// their total wait.
	Delayed int64
	Waited  time.Duration
	// Throttled counts requests rejected by adaptive throttling.
	Throttled int64
	// FailedFast counts requests failed at once because their turn fell
	// after their deadline or beyond the max wait.
	FailedFast int64
	// Got429 and Got503 count such responses from the upstream.
	Got429, Got503 int64
}

// Stats returns the Transport's counters. It is safe for concurrent use;
// the fields are read one by one, not as one atomic snapshot.
func (t *Transport) Stats() Stats {
	return Stats{
		Requests:   t.requests.Load(),
		Sent:       t.sent.Load(),
		Delayed:    t.delayed.Load(),
		Waited:     time.Duration(t.waitNanos.Load()),
		Throttled:  t.throttled.Load(),
		FailedFast: t.failedFast.Load(),
		Got429:     t.rejected429.Load(),
		Got503:     t.rejected503.Load(),
	}
}

// RoundTrip sends req to the upstream when its key's turn comes, and learns
// from the response. It blocks while the request waits for its turn; see
// Transport for the errors it returns without sending. When a concurrency
// cap is set, the request's place is held until the response body is closed
// (or read to its end).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	start := clock.Now()
	ref, _ := t.keys.Get(t.cfg.key(req), start) // OverflowShare: always a state
	k := ref.Value()
	if err := t.admit(k, start); err != nil {
		ref.Release()
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	if t.cfg.concurrency > 0 {
		if err := t.acquirePlace(ctx, k, start); err != nil {
			ref.Release()
			closeBody(req)
			return nil, err
		}
	}
	sent, waited, err := t.awaitTurn(ctx, k, start)
	if err != nil {
		t.releasePlace(k)
		ref.Release()
		closeBody(req)
		return nil, err
	}
	t.sent.Add(1)
	if waited {
		t.delayed.Add(1)
		t.waitNanos.Add(clock.Now() - start)
	}
	resp, err := t.next.RoundTrip(req)
	t.learn(k, sent, resp, err)
	if err != nil || t.cfg.concurrency == 0 {
		t.releasePlace(k)
		ref.Release()
		return resp, err
	}
	resp.Body = &placeBody{rc: resp.Body, done: func() { t.releasePlace(k); ref.Release() }}
	return resp, nil
}

// admit rejects the request locally with the SRE formula's probability.
// Requests are counted when their outcome is known: here when rejected
// locally, in learn when the upstream answered. (Counting them on arrival
// would make requests that wait for their turn, or are in flight, look
// like rejections.)
func (t *Transport) admit(k *keyState, now int64) error {
	if !t.cfg.throttle {
		return nil
	}
	k.mu.Lock()
	requests, accepts := k.throttle.totals(now)
	p := min(t.cfg.maxReject, throttleProbability(requests, accepts, t.cfg.k))
	if p == 0 || t.cfg.random() >= p {
		k.mu.Unlock()
		return nil
	}
	k.throttle.request(now)
	k.mu.Unlock()
	t.throttled.Add(1)
	return fmt.Errorf("%w: rejection probability %.2f (%d requests, %d accepted in the window)",
		ErrThrottled, p, requests, accepts)
}

// turnBounds are the latest instants a request's turn may fall on.
type turnBounds struct {
	deadline, maxWait int64 // math.MaxInt64: none
}

func (t *Transport) bounds(ctx context.Context, start int64) turnBounds {
	b := turnBounds{deadline: math.MaxInt64, maxWait: math.MaxInt64}
	if dl, ok := ctx.Deadline(); ok {
		// The context's deadline is wall-clock time; time.Until follows
		// synctest's clock as clock.Now does.
		b.deadline = clock.Now() + int64(time.Until(dl))
	}
	if t.cfg.maxWait > 0 {
		b.maxWait = start + int64(t.cfg.maxWait)
	}
	return b
}

// check returns the error for a turn at, or nil when at is within bounds.
func (t *Transport) check(b turnBounds, now, at int64) error {
	if at > b.deadline {
		t.failedFast.Add(1)
		return fmt.Errorf("%w: turn in %v", ErrDeadline, time.Duration(at-now))
	}
	if at > b.maxWait {
		t.failedFast.Add(1)
		return fmt.Errorf("%w: turn in %v", ErrMaxWait, time.Duration(at-now))
	}
	return nil
}

// awaitTurn blocks until the request may be sent, charges it and returns its
// dispatch number, and whether it had to wait.
func (t *Transport) awaitTurn(ctx context.Context, k *keyState, start int64) (sent dispatch, waited bool, err error) {
	b := t.bounds(ctx, start)
	if t.gcra == nil {
		return t.awaitPacer(ctx, k, b)
	}
	return t.awaitBucket(ctx, k, b)
}

// awaitPacer is awaitTurn in pacer mode: wait out the key's blocks, then
// for a pacer slot, and send when no block arrived meanwhile.
func (t *Transport) awaitPacer(ctx context.Context, k *keyState, b turnBounds) (dispatch, bool, error) {
	for waited := false; ; waited = true {
		if err := ctx.Err(); err != nil {
			return dispatch{}, waited, err
		}
		k.mu.Lock()
		now := clock.Now()
		from, epoch := k.earliestLocked(now), k.epoch
		k.mu.Unlock()
		if from > now {
			if err := t.check(b, now, from); err != nil {
				return dispatch{}, waited, err
			}
			if err := sleep(ctx, from-now); err != nil {
				return dispatch{}, waited, err
			}
			continue
		}
		ok, slept, err := t.pacerTurn(ctx, k, b, now)
		waited = waited || slept
		if err != nil {
			return dispatch{}, waited, err
		}
		if !ok {
			continue
		}
		if sent, ok := t.claim(k, epoch, 0); ok {
			return sent, waited, nil
		} // blocked while waiting for the slot: the slot is lost
	}
}

// awaitBucket is awaitTurn in token-bucket mode: reserve the first instant
// at or after the key's blocks at which the bucket holds a token, sleep
// until then, and send when no block arrived meanwhile. Charging the bucket
// at a future instant makes the turns exact and first come, first served.
func (t *Transport) awaitBucket(ctx context.Context, k *keyState, b turnBounds) (dispatch, bool, error) {
	for waited := false; ; waited = true {
		if err := ctx.Err(); err != nil {
			return dispatch{}, waited, err
		}
		r, err := t.reserve(k, b)
		if err != nil {
			return dispatch{}, waited, err
		}
		if r.sent {
			return r.dispatch, waited, nil
		}
		if err := sleep(ctx, r.at-r.now); err != nil {
			k.mu.Lock()
			t.refundLocked(k, r.mine, clock.Now())
			k.mu.Unlock()
			return dispatch{}, true, err
		}
		if sent, ok := t.claim(k, r.epoch, r.mine); ok {
			return sent, true, nil
		} // a block or an exhausted quota arrived while it slept: wait again
	}
}

// turn is a token reserved for one request in token-bucket mode.
type turn struct {
	now, at  int64  // when it was reserved, and the instant reserved
	epoch    uint64 // the key's block epoch then
	mine     uint64 // the key's reservation number for it
	sent     bool   // at was now: charged at once, dispatch is its own
	dispatch dispatch
}

// reserve reserves the key's next token within b, charging it at once when
// it is due now.
func (t *Transport) reserve(k *keyState, b turnBounds) (turn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := clock.Now()
	from := k.earliestLocked(now)
	r := turn{now: now, at: from, epoch: k.epoch}
	// GCRA.ReserveN charges the bucket now as if the token were taken at
	// its slot; one too late for b is cancelled at once (under k.mu it is
	// the latest, so it comes back exactly).
	rv := t.gcra.ReserveN(&k.bucket, from, 1, 0, ratelimit.MaxReserveWait)
	if !rv.Allowed() {
		return r, fmt.Errorf("upstream: bucket cannot grant a request: %v", rv.Decision.Reason())
	}
	r.at = from + int64(rv.Wait)
	k.reservation++
	k.reserved = rv
	if err := t.check(b, now, r.at); err != nil {
		t.refundLocked(k, k.reservation, now)
		return r, err
	}
	r.mine = k.reservation
	if r.at <= now {
		r.dispatch, r.sent = k.chargeLocked(now), true // no wait
	}
	return r, nil
}

// claim charges a request whose turn came, unless a block or an exhausted
// quota arrived since the key's epoch was read; then, in token-bucket mode,
// it gives back reservation mine and reports false.
func (t *Transport) claim(k *keyState, epoch, mine uint64) (dispatch, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := clock.Now()
	if k.epoch != epoch || k.earliestLocked(now) > now {
		if t.gcra != nil {
			t.refundLocked(k, mine, now)
		}
		return dispatch{}, false
	}
	return k.chargeLocked(now), true
}

// refundLocked gives back the token of reservation mine, but only when no
// later reservation was made: then GCRA.Cancel undoes it exactly; a later
// slot still belongs to another waiter (no double booking). A token that
// cannot be given back is lost: the key runs below its rate for a moment,
// never above it.
func (t *Transport) refundLocked(k *keyState, mine uint64, now int64) {
	if k.reservation != mine {
		return
	}
	t.gcra.Cancel(&k.bucket, now, 1, k.reserved)
	k.reservation++ // the same token cannot be given back twice
}

// pacerTurn waits for a pacer slot. It reports false when the caller must
// look at the key's blocks again, and whether it waited.
func (t *Transport) pacerTurn(ctx context.Context, k *keyState, b turnBounds, now int64) (bool, bool, error) {
	k.mu.Lock()
	if k.pacer == nil {
		p, err := queueing.NewPacer(t.pacerN, t.pacerP) // validated in NewTransport
		if err != nil {
			k.mu.Unlock()
			return false, false, err
		}
		k.pacer = p
	}
	p := k.pacer
	if p.AllowAt(now) {
		k.lastSlot = max(k.lastSlot, now)
		k.mu.Unlock()
		return true, false, nil
	}
	k.mu.Unlock()
	wctx, maxWaitFirst := ctx, false
	if b.maxWait < b.deadline {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, time.Duration(b.maxWait-clock.Now()))
		defer cancel()
		maxWaitFirst = true
	}
	if err := p.Wait(wctx); err != nil {
		switch {
		case errors.Is(err, queueing.ErrDeadline) && maxWaitFirst:
			t.failedFast.Add(1)
			return false, true, fmt.Errorf("%w (%w)", ErrMaxWait, err)
		case errors.Is(err, queueing.ErrDeadline):
			t.failedFast.Add(1)
			return false, true, fmt.Errorf("%w (%w)", ErrDeadline, err)
		case ctx.Err() != nil:
			return false, true, ctx.Err()
		case maxWaitFirst && errors.Is(err, context.DeadlineExceeded):
			t.failedFast.Add(1)
			return false, true, fmt.Errorf("%w (%w)", ErrMaxWait, err)
		}
		return false, true, err
	}
	k.mu.Lock()
	k.lastSlot = max(k.lastSlot, clock.Now())
	k.mu.Unlock()
	return true, true, nil
}

// sleep waits d on a timer, or until ctx ends.
func sleep(ctx context.Context, d int64) error {
	tm := time.NewTimer(time.Duration(d))
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// acquirePlace takes a place under the key's concurrency cap, waiting for
// one under ctx and the max wait in the key's queue (first come, first
// served; a freed place is handed to the longest waiter).
func (t *Transport) acquirePlace(ctx context.Context, k *keyState, start int64) error {
	k.mu.Lock()
	if k.places == nil {
		sem, q, err := t.newPlaces()
		if err != nil {
			k.mu.Unlock()
			return fmt.Errorf("upstream: %w", err)
		}
		k.sem, k.places = sem, q
	}
	q := k.places
	k.mu.Unlock()
	if q.TryAcquire(1) {
		return nil
	}
	wctx := ctx
	if t.cfg.maxWait > 0 {
		// The max wait counts from the start of RoundTrip, as the turn's does.
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, time.Duration(start+int64(t.cfg.maxWait)-clock.Now()), errPlaceWait)
		defer cancel()
	}
	err := q.Acquire(wctx, 1)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(context.Cause(wctx), errPlaceWait):
		t.failedFast.Add(1)
		return fmt.Errorf("%w: the concurrency cap of %d stayed full", ErrMaxWait, t.cfg.concurrency)
	}
	return fmt.Errorf("upstream: %w", err)
}

// errPlaceWait is the cause of a wait for a place that ran out of max wait.
var errPlaceWait = errors.New("upstream: max wait for a place")

// newPlaces returns the queue of a key's concurrency cap: waiters bounded
// only by time (their contexts and the max wait), as a caller of an
// http.Client expects.
func (t *Transport) newPlaces() (*concurrency.Semaphore, *queueing.Queue, error) {
	sem, err := concurrency.NewSemaphore(t.cfg.concurrency)
	if err != nil {
		return nil, nil, err
	}
	q, err := queueing.New(sem, queueing.WithMaxLength(math.MaxInt))
	return sem, q, err
}

// releasePlace gives back the place acquirePlace took, if a cap is set.
func (t *Transport) releasePlace(k *keyState) {
	if t.cfg.concurrency == 0 {
		return
	}
	k.mu.Lock()
	q := k.places
	k.mu.Unlock()
	q.Release(1) // hands the place to the longest waiter, if any
}

// learn updates the key's state from the upstream's answer to the request
// sent.
func (t *Transport) learn(k *keyState, sent dispatch, resp *http.Response, err error) {
	now := clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.answered++
	if err != nil {
		// A failed round trip counts as a request not accepted, unless the
		// caller gave up on it.
		if t.cfg.throttle && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			k.throttle.request(now)
		}
		return
	}
	if t.cfg.throttle {
		k.throttle.request(now)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		t.rejected429.Add(1)
	case http.StatusServiceUnavailable:
		t.rejected503.Add(1)
	default:
		if t.cfg.throttle {
			k.throttle.accept(now)
		}
	}
	date := time.Now() // wall-clock time for HTTP-dates; synctest's in a bubble
	for _, q := range readQuotas(resp.Header, date) {
		t.applyQuotaLocked(k, sent, now, q)
	}
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return
	}
	block := int64(0)
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), date); ok {
		block = now + int64(d)
	} else if k.earliestLocked(now) <= now {
		block = now + int64(defaultBlock) // no word on when: back off a little
	}
	if block > k.blockedUntil {
		k.blockedUntil = block
		k.epoch++
	}
}

// applyQuotaLocked records quota q the upstream reported on the response to
// request sent, at now. The count is made conservative: the reserved share
// of the limit is taken off when the limit is known, and every request
// dispatched after sent is assumed to be missing from it, and so is every
// request dispatched before it that was still unanswered then (the
// upstream may have counted it after this one: requests sent at once reach
// it in any order). A report replaces the one on file for the same name
// when it is newer (a later request's) or stricter.
func (t *Transport) applyQuotaLocked(k *keyState, sent dispatch, now int64, q quota) {
	seq := sent.seq
	left := q.remaining - int64(k.sent-seq) - int64(sent.ahead)
	if q.limit > 0 {
		// The share of the limit kept back, as for the local burst: the
		// usable part is the reserve's share rounded down, at least 1.
		left -= q.limit - max(1, int64(math.Floor(float64(q.limit)*t.cfg.reserve)))
	}
	resetAt := now + int64(q.reset)
	free := -1
	for i := range k.quotas {
		s := &k.quotas[i]
		if s.active && s.resetAt <= now {
			*s = quotaState{}
		}
		if !s.active {
			if free < 0 {
				free = i
			}
			continue
		}
		if s.name != q.name {
			continue
		}
		if seq > s.seq || left < s.left {
			*s = quotaState{active: true, name: q.name, left: left, resetAt: resetAt, seq: seq}
		}
		return
	}
	if free >= 0 {
		k.quotas[free] = quotaState{active: true, name: q.name, left: left, resetAt: resetAt, seq: seq}
	}
}

// placeBody releases a request's place under the concurrency cap when
// the response body is closed or read to its end, exactly once.
type placeBody struct {
	rc   io.ReadCloser
	once sync.Once
	done func()
}

func (b *placeBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *placeBody) Close() error {
	err := b.rc.Close()
	b.once.Do(b.done)
	return err
}

// closeBody closes a request body the Transport will not send, as
// the RoundTripper contract asks.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
