package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/membership"
	"github.com/sluicehq/sluice/store/internal/sqlquota"
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
	// last of them Closes (fallbacks, that one instance).
	instance  string
	fallbacks *membership.Instance

	limits sqlquota.Limits // by LimitID, with the names in use
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Updater  = (*Store)(nil)
	_ store.Resetter = (*Store)(nil)
)

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
	s := &Store{
		instance:   hex.EncodeToString(id[:]),
		pool:       pool,
		name:       cfg.schema,
		schema:     q,
		timeout:    cfg.timeout,
		waitMS:     int32(min(max(cfg.timeout/time.Millisecond, 1), math.MaxInt32)),
		decideSQL:  "SELECT " + q + ".decide($1, $2, $3, $4, $5, $6, $7, $8, $9)",
		refundSQL:  "SELECT " + q + ".refund($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
		resetSQL:   "DELETE FROM " + q + ".state WHERE name = $1 AND kind = $2 AND key = $3",
		beatSQL:    "SELECT " + q + ".beat($1, $2)",
		leaveSQL:   "DELETE FROM " + q + ".instances WHERE id = $1",
		cleanupSQL: "SELECT " + q + ".cleanup($1)",
		limits:     sqlquota.Limits{Backend: "PostgreSQL", Package: "pgstore", Sliding: true, Text: true},
	}
	s.fallbacks = membership.New("PostgreSQL", s.beat)
	return s, nil
}

// Register validates spec and adds it, without I/O. Besides
// store.Spec.Validate's checks it rejects store.SlidingLog and
// store.Concurrency (per-request abuse limits, whose state grows with the
// limit or lives for a request: keep them on store.Memory or redisstore),
// and a name that PostgreSQL cannot keep as text (invalid UTF-8, a NUL).
// Errors start with "store: ". Limits of the same Name in stores of the
// same schema share their state: register the same spec everywhere.
func (s *Store) Register(_ context.Context, spec store.Spec) (store.LimitID, error) {
	return s.limits.Register(spec)
}

// Update changes limit id's Limit in place (store.Updater), without I/O:
// the decide function gets the limit with every call. A fixed or sliding
// window keeps its counts (a key over a lowered limit is admitted nothing
// until they fall under it); a token bucket keeps its debt in time (exact
// for a change of burst). A token bucket's rate cannot change in place
// here (its debt would change meaning, and every instance would have to
// agree on when): that is an error, so the caller registers a new limit.
// Also an error, the limit unchanged: an id not registered (matching
// store.ErrUnknownLimit), another Name, Algorithm, Window, Calendar,
// Capacity or Overflow. Other Stores of the schema that share the name
// keep their own parameters until they are updated too.
func (s *Store) Update(_ context.Context, id store.LimitID, spec store.Spec) error {
	return s.limits.Update(id, spec)
}

// Unregister drops limit id from this Store, without I/O (see
// store.Store): later calls naming id fail with store.ErrUnknownLimit, and
// its name may be registered again. Its rows are not deleted: other Stores
// of the schema that registered the name share them, and Cleanup deletes
// them once expired. A limit registered again under the name (and the same
// algorithm) meets that state until it expires. It returns an error
// matching store.ErrUnknownLimit when id is not registered.
func (s *Store) Unregister(_ context.Context, id store.LimitID) error {
	return s.limits.Unregister(id)
}

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
	var lim [store.MaxHits]*sqlquota.Limit
	if err := s.limits.Decision(req, res, &lim); err != nil {
		return err
	}
	args := s.args(req, &lim)
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var vals []int64
	if err := s.pool.QueryRow(cctx, s.decideSQL, args...).Scan(&vals); err != nil {
		return s.failed(ctx, err)
	}
	if !sqlquota.Decode(vals, req, res, &lim) {
		return store.Unavailable(errReply)
	}
	return nil
}

// args returns the arguments of the decide and refund functions for req's
// hits, whose limits are lim (names, kinds, keys, costs, limits, params,
// shifts, months and the lock timeout).
func (s *Store) args(req *store.Request, lim *[store.MaxHits]*sqlquota.Limit) []any {
	n := req.N
	names, keys := make([]string, n), make([][]byte, n)
	kinds, months := make([]int16, n), make([]int32, n)
	costs, limits, params, shifts := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, l := range lim[:n] {
		names[i], keys[i], kinds[i], costs[i] = l.Spec.Name, []byte(req.Hits[i].Key), l.Kind, req.Hits[i].Cost
		limits[i], params[i] = l.Spec.Limit, l.Param
		shifts[i], months[i] = int64(l.Clock.Shift()), int32(l.Clock.Months())
	}
	return []any{names, kinds, keys, costs, limits, params, shifts, months, s.waitMS}
}

var errReply = errors.New("pgstore: malformed reply of the decide function")

// Release returns an error: the PostgreSQL store holds no leases (no
// Concurrency limit registers), so a lease is never held
// (store.ErrLeaseNotHeld) or names a limit this store does not hold
// (store.ErrUnknownLimit). It does no I/O.
func (s *Store) Release(_ context.Context, lease store.Lease, _ int64) error {
	return s.limits.ReleaseNone(lease)
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
