package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/store"
)

// Store is a store.Store on PostgreSQL, through a pgxpool.Pool the caller
// owns, for quotas over hours, days and calendar months that must survive
// a restart and be read back for billing.
//
// Decide is one statement, one round trip: a call of the schema's decide
// function, which reads clock_timestamp() once, locks every state the
// request names in a fixed order, evaluates the hits in order on that one
// instant and writes nothing unless all are admitted. The statement runs
// in its own implicit transaction, so no transaction stays open across a
// network wait, and instances with different clocks share the database's
// timeline. Token buckets, fixed windows and sliding windows (the windows on
// any store.Calendar, placed exactly as store.Memory places them) are kept,
// with Memory's decisions to the nanosecond at the same instant; sliding
// logs and concurrency leases are a Register error.
//
// The schema is created by Migrate, never implicitly: a Store whose schema
// is missing fails every call with store.ErrUnavailable. Expired rows stay
// until Cleanup deletes them.
//
// Calls run with a per-call deadline (WithTimeout, DefaultTimeout by
// default) and are never retried: a lost reply fails the call with
// store.ErrUnavailable rather than risk charging twice (the decision may
// have been committed). Register, Update and Unregister are local (no
// I/O): they keep each spec's parameters for the function.
//
// A Store is safe for concurrent use. It has no goroutine and nothing to
// close; the pool stays the caller's. Use New; the zero value is not
// usable.
type Store struct {
	pool    *pgxpool.Pool
	name    string // the schema
	schema  string // quoted
	timeout time.Duration
	waitMS  int32 // timeout in whole ms, at least 1: the function's lock_timeout

	decideSQL, refundSQL, resetSQL, cleanupSQL, beatSQL, leaveSQL string

	// instance is this Store's id in the instances table: the Fallbacks
	// around one Store are one instance, which leaves the table when the
	// last of them (counted by fallbacks) Closes.
	instance  string
	fallbacks atomic.Int64

	limits store.Registry[limit] // by LimitID, with the names in use
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Updater  = (*Store)(nil)
	_ store.Resetter = (*Store)(nil)
)

// limit is a registered spec with the decide function's arguments.
type limit struct {
	spec  store.Spec
	kind  int16 // 1 token bucket, 2 fixed window, 3 sliding window
	param int64 // emission interval (bucket) or span on the window clock, ns
	clock store.WindowClock
}

// New returns a Store deciding on pool's database, in the schema of
// WithSchema (DefaultSchema by default), which Migrate creates. It does no
// I/O. It returns an error for a nil pool or a bad option.
func New(pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: nil pool")
	}
	cfg := config{schema: DefaultSchema, timeout: DefaultTimeout}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("pgstore: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	q := quote(cfg.schema)
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &Store{
		instance:   hex.EncodeToString(id[:]),
		pool:       pool,
		name:       cfg.schema,
		schema:     q,
		timeout:    cfg.timeout,
		waitMS:     int32(min(max(cfg.timeout/time.Millisecond, 1), math.MaxInt32)),
		decideSQL:  "SELECT " + q + ".decide($1, $2, $3, $4, $5, $6, $7, $8, $9)",
		refundSQL:  "SELECT " + q + ".refund($1, $2, $3, $4, $5, $6, $7, $8, $9)",
		resetSQL:   "DELETE FROM " + q + ".state WHERE name = $1 AND kind = $2 AND key = $3",
		beatSQL:    "SELECT " + q + ".beat($1, $2)",
		leaveSQL:   "DELETE FROM " + q + ".instances WHERE id = $1",
		cleanupSQL: "SELECT " + q + ".cleanup($1)",
	}, nil
}

// Register validates spec and adds it, without I/O. Besides
// store.Spec.Validate's checks it rejects store.SlidingLog and
// store.Concurrency (per-request abuse limits, whose state grows with the
// limit or lives for a request: keep them on store.Memory or redisstore),
// and a name that PostgreSQL cannot keep as text (invalid UTF-8, a NUL). Errors start with "store: ". Limits of the
// same Name in stores of the same schema share their state: register the
// same spec everywhere.
func (s *Store) Register(_ context.Context, spec store.Spec) (store.LimitID, error) {
	l, err := newLimit(spec)
	if err != nil {
		return 0, err
	}
	return s.limits.Add(spec.Name, l)
}

// newLimit validates spec for the decide function.
func newLimit(spec store.Spec) (*limit, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if !utf8.ValidString(spec.Name) || strings.IndexByte(spec.Name, 0) >= 0 {
		return nil, fmt.Errorf("store: limit %q: the PostgreSQL store needs a name of valid UTF-8 without NUL bytes", spec.Name)
	}
	l := &limit{spec: spec}
	switch spec.Algorithm {
	case store.TokenBucket:
		// The emission interval of concurrency.GCRA: Per/Count rounded up.
		l.kind, l.param = 1, int64(spec.Rate.Per)/spec.Rate.Count
		if int64(spec.Rate.Per)%spec.Rate.Count != 0 {
			l.param++
		}
	case store.FixedWindow, store.SlidingWindow:
		l.clock = spec.Calendar.Clock(spec.Window)
		l.kind, l.param = 2, int64(l.clock.Span())
		if spec.Algorithm == store.SlidingWindow {
			l.kind = 3
		}
	default:
		return nil, fmt.Errorf("store: limit %q: the PostgreSQL store keeps token buckets, fixed and sliding windows, not %v; use store.Memory or redisstore for it", spec.Name, spec.Algorithm)
	}
	return l, nil
}

// Update changes limit id's Limit in place (store.Updater), without I/O:
// the decide function gets the limit with every call. A fixed or sliding
// window keeps its counts (a key over a lowered limit is admitted nothing
// until they fall under it); a token bucket keeps its debt in time (exact for a change of
// burst). A token bucket's rate cannot change in place here (its debt would
// change meaning, and every instance would have to agree on when): that is
// an error, so the caller registers a new limit. Also an error, the limit
// unchanged: an id not registered (matching store.ErrUnknownLimit), another
// Name, Algorithm, Window, Calendar, Capacity or Overflow. Other Stores of
// the schema that share the name keep their own parameters until they are
// updated too.
func (s *Store) Update(_ context.Context, id store.LimitID, spec store.Spec) error {
	l, err := newLimit(spec)
	if err != nil {
		return err
	}
	return s.limits.Replace(id, l, func(old *limit) error { return store.CheckInPlace(old.spec, spec, "PostgreSQL") })
}

// Unregister drops limit id from this Store, without I/O (see
// store.Store): later calls naming id fail with store.ErrUnknownLimit, and
// its name may be registered again. Its rows are not deleted: other Stores
// of the schema that registered the name share them, and Cleanup deletes
// them once expired. A limit registered again under the name (and the same
// algorithm) meets that state until it expires. It returns an error
// matching store.ErrUnknownLimit when id is not registered.
func (s *Store) Unregister(_ context.Context, id store.LimitID) error {
	return s.limits.Remove(id, func(l *limit) string { return l.spec.Name })
}

func (s *Store) load() []*limit { return s.limits.All() }

func (s *Store) lookup(id store.LimitID) *limit { return s.limits.Lookup(id) }

// Decide charges req's hits, all or nothing, in one statement on the
// database's clock (see store.Store). It ignores req.Now; res.Now is the
// database's clock_timestamp() in Unix nanoseconds, at microsecond
// resolution. It returns an error, charging nothing, when req is malformed
// or names a limit this store does not hold (matching
// store.ErrUnknownLimit); the caller's ctx.Err() when ctx ends first; and
// an error matching store.ErrUnavailable when the database fails, is not
// migrated, or misses the store's deadline (a lost reply is not retried,
// so the request may or may not have been charged). It blocks for one round
// trip.
func (s *Store) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	if req == nil || res == nil {
		return errors.New("store: Decide needs a request and a result")
	}
	if err := req.Check(); err != nil {
		return err
	}
	var lim [store.MaxHits]*limit
	args, err := s.args(req, &lim)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var vals []int64
	if err := s.pool.QueryRow(cctx, s.decideSQL, args...).Scan(&vals); err != nil {
		return s.failed(ctx, err)
	}
	if err := parseDecision(vals, req, res, &lim); err != nil {
		return store.Unavailable(err)
	}
	return nil
}

// args returns the arguments of the decide and refund functions for req's
// hits (names, kinds, keys, costs, limits, params, shifts, months and the
// lock timeout) and fills lim with their limits. It returns an error
// matching store.ErrUnknownLimit when a hit names a limit not held here.
func (s *Store) args(req *store.Request, lim *[store.MaxHits]*limit) ([]any, error) {
	// Its SQL function decides at once; a reservation would need the slot
	// and the state it left in the reply, which it has no room for yet.
	if err := store.RefuseReserve(req, "pgstore"); err != nil {
		return nil, err
	}
	ls := s.load()
	n := req.N
	names, keys := make([]string, n), make([][]byte, n)
	kinds, months := make([]int16, n), make([]int32, n)
	costs, limits, params, shifts := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i := range req.Hits[:n] {
		h := &req.Hits[i]
		if int(h.Limit) > len(ls) || ls[h.Limit-1] == nil {
			return nil, fmt.Errorf("%w: hit %d names limit %d", store.ErrUnknownLimit, i, h.Limit)
		}
		l := ls[h.Limit-1]
		lim[i] = l
		names[i], keys[i], kinds[i], costs[i] = l.spec.Name, []byte(h.Key), l.kind, h.Cost
		limits[i], params[i] = l.spec.Limit, l.param
		shifts[i], months[i] = int64(l.clock.Shift()), int32(l.clock.Months())
	}
	return []any{names, kinds, keys, costs, limits, params, shifts, months, s.waitMS}, nil
}

var errReply = errors.New("pgstore: malformed reply of the decide function")

// parseDecision fills res from the decide function's reply.
func parseDecision(vals []int64, req *store.Request, res *store.Result, lim *[store.MaxHits]*limit) error {
	if len(vals) < 2 {
		return errReply
	}
	n := vals[1]
	if n < 1 || n > int64(req.N) || len(vals) != 2+5*int(n) {
		return errReply
	}
	res.Now, res.N, res.Decider, res.Allowed = vals[0], int(n), 0, true
	for i := range res.N {
		f := vals[2+5*i : 2+5*i+5]
		d := concurrency.Decision{
			Limit:      lim[i].spec.Limit,
			Remaining:  f[2],
			ResetAfter: time.Duration(f[4]),
		}
		switch {
		case f[0] == 1:
			// Admitted: RetryAfter stays 0.
		case f[1] == 2:
			d.RetryAfter = concurrency.Never
		default:
			// At least 1 ns: a rejection must not read as an admission.
			d.RetryAfter = max(1, time.Duration(f[3]))
		}
		res.Hits[i] = store.HitResult{Decision: d}
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
	return nil
}

// Release returns an error: the PostgreSQL store holds no leases (no
// Concurrency limit registers), so a lease is never held
// (store.ErrLeaseNotHeld) or names a limit this store does not hold
// (store.ErrUnknownLimit). It does no I/O.
func (s *Store) Release(_ context.Context, lease store.Lease, _ int64) error {
	if !lease.Held() {
		return store.ErrLeaseNotHeld
	}
	if s.lookup(lease.Limit) == nil {
		return fmt.Errorf("%w: lease names limit %d", store.ErrUnknownLimit, lease.Limit)
	}
	return fmt.Errorf("store: lease names limit %d, which is not a concurrency limit", lease.Limit)
}

// failed maps the error of a call: the caller's ctx.Err() when its context
// ended, and otherwise an error matching store.ErrUnavailable, with a hint
// when the schema was never migrated.
func (s *Store) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pe.Code {
		case "3F000", "42P01", "42883": // no such schema, table or function
			err = fmt.Errorf("pgstore: schema %s is not migrated (call Migrate): %w", s.schema, err)
		case "55P03":
			// The function's lock_timeout is the store's deadline: the
			// database noticed it first.
			err = fmt.Errorf("pgstore: %w: %w", context.DeadlineExceeded, err)
		}
	}
	return store.Unavailable(err)
}

// schemaSQL returns the migration text for the quoted schema q.
func schemaSQL(q string) string { return strings.ReplaceAll(schemaSrc, "@schema@", q) }
