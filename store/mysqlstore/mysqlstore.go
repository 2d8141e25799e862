package mysqlstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/store"
)

// MaxNameLen and MaxKeyLen bound a limit's name and a hit's key, in bytes:
// the columns of the store's primary key.
const (
	MaxNameLen = 255
	MaxKeyLen  = 767
)

// Store is a store.Store on MariaDB, through a *sql.DB of
// github.com/go-sql-driver/mysql that the caller owns, for quotas over
// hours, days and calendar months that must survive a restart and be read
// back for billing.
//
// Decide is one statement, one round trip: a CALL of the store's decide
// procedure, which locks every state the request names in one fixed order,
// reads the database's clock once, evaluates the hits in order on that
// instant and commits only when all are admitted. Token buckets and fixed
// windows (on any store.Calendar, placed exactly as store.Memory places
// them) are kept, with Memory's decisions to the nanosecond at the same
// instant; sliding windows, sliding logs and concurrency leases are a
// Register error.
//
// The table and procedures are created by Migrate, never implicitly: a
// Store whose schema is missing fails every call with store.ErrUnavailable.
// Expired rows stay until Cleanup deletes them.
//
// Calls run under a per-call deadline (WithTimeout, DefaultTimeout by
// default) on the client and, as max_statement_time, on the server, and are
// never retried by the store unless the server rolled them back (a
// deadlock's victim). Register, Update and Unregister are local (no
// I/O).
//
// A Store is safe for concurrent use. It has no goroutine and nothing to
// close; the *sql.DB stays the caller's. Use New; the zero value is not
// usable.
type Store struct {
	db      *sql.DB
	prefix  string
	timeout time.Duration
	// set is the statement prefix that bounds each call on the server.
	set string

	decideSQL, refundSQL, stateTable, cleanupSQL string

	// instance identifies this Store among the instances of its prefix
	// (fallback.Membership); fallbacks counts the open Fallbacks around it.
	instance  string
	fallbacks atomic.Int64

	limits store.Registry[limit] // by LimitID, with the names in use
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Updater  = (*Store)(nil)
	_ store.Resetter = (*Store)(nil)
	_ store.Refunder = (*Store)(nil)
)

// limit is a registered spec with the decide procedure's arguments.
type limit struct {
	spec  store.Spec
	kind  int16 // 1 token bucket, 2 fixed window
	param int64 // emission interval (bucket) or span on the window clock, ns
	clock store.WindowClock
	name  string // the name in hex
}

// New returns a Store deciding on db's database, in the table and
// procedures of WithPrefix (DefaultPrefix by default), which Migrate
// creates. It does no I/O. It returns an error for a nil db or a bad
// option.
func New(db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, errors.New("mysqlstore: nil db")
	}
	cfg := config{prefix: DefaultPrefix, timeout: DefaultTimeout}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("mysqlstore: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	return &Store{
		db:         db,
		prefix:     cfg.prefix,
		timeout:    cfg.timeout,
		set:        "SET STATEMENT max_statement_time=" + strconv.FormatFloat(cfg.timeout.Seconds(), 'f', 6, 64) + " FOR ",
		decideSQL:  "CALL " + object(cfg.prefix, "decide") + "('",
		refundSQL:  "CALL " + object(cfg.prefix, "refund") + "('",
		stateTable: object(cfg.prefix, "state"),
		cleanupSQL: "CALL " + object(cfg.prefix, "cleanup") + "(",
		instance:   rand.Text(),
	}, nil
}

// object returns the quoted name of the store's object of kind.
func object(prefix, kind string) string { return "`" + prefix + "_" + kind + "`" }

// Prefix returns the prefix of the store's table and routines, as
// WithPrefix set it.
func (s *Store) Prefix() string { return s.prefix }

// Register validates spec and adds it, without I/O. Besides
// store.Spec.Validate's checks it rejects store.SlidingWindow,
// store.SlidingLog and store.Concurrency (keep per-request abuse limits on
// store.Memory or redisstore) and a name longer than MaxNameLen bytes.
// Errors start with "store: ". Limits of the same Name in Stores of the
// same prefix share their state: register the same spec everywhere.
func (s *Store) Register(_ context.Context, spec store.Spec) (store.LimitID, error) {
	l, err := newLimit(spec)
	if err != nil {
		return 0, err
	}
	return s.limits.Add(spec.Name, l)
}

// newLimit validates spec for the decide procedure.
func newLimit(spec store.Spec) (*limit, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if len(spec.Name) > MaxNameLen {
		return nil, fmt.Errorf("store: limit %q: the MySQL store keeps names of at most %d bytes, got %d", spec.Name, MaxNameLen, len(spec.Name))
	}
	l := &limit{spec: spec, name: hex.EncodeToString([]byte(spec.Name))}
	switch spec.Algorithm {
	case store.TokenBucket:
		// The emission interval of concurrency.GCRA: Per/Count rounded up.
		l.kind, l.param = 1, int64(spec.Rate.Per)/spec.Rate.Count
		if int64(spec.Rate.Per)%spec.Rate.Count != 0 {
			l.param++
		}
	case store.FixedWindow:
		l.clock = spec.Calendar.Clock(spec.Window)
		l.kind, l.param = 2, int64(l.clock.Span())
	default:
		return nil, fmt.Errorf("store: limit %q: the MySQL store keeps token buckets and fixed windows, not %v; use store.Memory or redisstore for it", spec.Name, spec.Algorithm)
	}
	return l, nil
}

// Update changes limit id's Limit in place (store.Updater), without I/O:
// the decide procedure gets the limit with every call. A fixed window keeps
// its counts (a key over a lowered limit is admitted nothing until the
// window ends); a token bucket keeps its debt in time. A token bucket's
// rate cannot change in place here: that is an error, so the caller
// registers a new limit. Also an error, the limit unchanged: an id not
// registered (matching store.ErrUnknownLimit), another Name, Algorithm,
// Window, Calendar, Capacity or Overflow. Other Stores of the prefix that
// share the name keep their own parameters until they are updated too.
func (s *Store) Update(_ context.Context, id store.LimitID, spec store.Spec) error {
	l, err := newLimit(spec)
	if err != nil {
		return err
	}
	return s.limits.Replace(id, l, func(old *limit) error { return store.CheckInPlace(old.spec, spec, "MySQL") })
}

// Unregister drops limit id from this Store, without I/O (see
// store.Store): later calls naming id fail with store.ErrUnknownLimit, and
// its name may be registered again. Its rows are not deleted (other Stores
// of the prefix may share them); Cleanup deletes them once expired. It
// returns an error matching store.ErrUnknownLimit when id is not
// registered.
func (s *Store) Unregister(_ context.Context, id store.LimitID) error {
	return s.limits.Remove(id, func(l *limit) string { return l.spec.Name })
}

// Decide charges req's hits, all or nothing, in one statement on the
// database's clock (see store.Store). It ignores req.Now; res.Now is the
// database's UTC_TIMESTAMP(6) in Unix nanoseconds, at microsecond
// resolution, read once the request's states are locked. It returns an
// error, charging nothing, when req is malformed, names a limit this store
// does not hold (matching store.ErrUnknownLimit) or a key longer than
// MaxKeyLen; the caller's ctx.Err() when ctx ends first; and an error
// matching store.ErrUnavailable when the database fails, is not migrated,
// or misses the store's deadline (the server then aborts and rolls back
// the decision; only a reply lost after the commit leaves it charged). A
// decision that InnoDB rolled back as a deadlock's victim is run again,
// within the same deadline (see queryRetryingDeadlocks). When
// the caller's ctx ends before the store's deadline, the client gives up
// at once but the server may still finish the decision within that
// deadline. It blocks for one round trip (one more per deadlock).
func (s *Store) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	if req == nil || res == nil {
		return errors.New("store: Decide needs a request and a result")
	}
	if err := req.Check(); err != nil {
		return err
	}
	if err := store.RefuseReserve(req, "mysqlstore"); err != nil {
		return err // its SQL decides at once
	}
	var lim [store.MaxHits]*limit
	if err := s.hitLimits(req, &lim); err != nil {
		return err
	}
	q := s.hitsQuery(s.decideSQL, req, &lim)
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	reply, err := s.queryRetryingDeadlocks(cctx, q)
	if err != nil {
		return s.failed(ctx, err)
	}
	if err := parseReply(reply, req, res, &lim); err != nil {
		return store.Unavailable(err)
	}
	return nil
}

// hitLimits fills lim with the limits req's hits name, or returns the
// error of a limit this store does not hold or a key too long.
func (s *Store) hitLimits(req *store.Request, lim *[store.MaxHits]*limit) error {
	ls := s.limits.All()
	for i := range req.Hits[:req.N] {
		h := &req.Hits[i]
		if int(h.Limit) > len(ls) || ls[h.Limit-1] == nil {
			return fmt.Errorf("%w: hit %d names limit %d", store.ErrUnknownLimit, i, h.Limit)
		}
		if len(h.Key) > MaxKeyLen {
			return fmt.Errorf("store: hit %d: the MySQL store keeps keys of at most %d bytes, got %d", i, MaxKeyLen, len(h.Key))
		}
		lim[i] = ls[h.Limit-1]
	}
	return nil
}

// hitsQuery returns the statement that calls proc (decide's or refund's
// "CALL name('") on req: the hits and the lock order as JSON string
// literals. Names and keys travel in hex and numbers in decimal, so the
// literals hold no quote or backslash whatever the input or SQL mode.
func (s *Store) hitsQuery(proc string, req *store.Request, lim *[store.MaxHits]*limit) string {
	var b strings.Builder
	b.Grow(len(s.set) + len(proc) + 128*req.N)
	b.WriteString(s.set)
	b.WriteString(proc)
	b.WriteByte('[')
	var num [20]byte
	field := func(v int64) {
		b.WriteString(`,"`)
		b.Write(strconv.AppendInt(num[:0], v, 10))
		b.WriteByte('"')
	}
	for i := range req.Hits[:req.N] {
		h, l := &req.Hits[i], lim[i]
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`["`)
		b.WriteString(l.name)
		b.WriteByte('"')
		field(int64(l.kind))
		b.WriteString(`,"`)
		for j := 0; j < len(h.Key); j++ {
			const digits = "0123456789abcdef"
			b.WriteByte(digits[h.Key[j]>>4])
			b.WriteByte(digits[h.Key[j]&15])
		}
		b.WriteByte('"')
		field(h.Cost)
		field(l.spec.Limit)
		field(l.param)
		field(int64(l.clock.Shift()))
		field(int64(l.clock.Months()))
		b.WriteByte(']')
	}
	b.WriteString("]','[")
	order := lockOrder(req, lim)
	for i, j := range order.idx[:order.n] {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(strconv.AppendInt(num[:0], int64(j), 10))
	}
	b.WriteString("]')")
	return b.String()
}

// hitOrder is the indexes of a request's distinct states, sorted.
type hitOrder struct {
	idx [store.MaxHits]int
	n   int
}

// lockOrder returns the first hit of each distinct state of req, ordered
// by (name, kind, key) bytes: the one order in which every decision locks
// its states, so that two decisions never wait for each other in a cycle.
func lockOrder(req *store.Request, lim *[store.MaxHits]*limit) hitOrder {
	var o hitOrder
	less := func(i, j int) int {
		if c := strings.Compare(lim[i].spec.Name, lim[j].spec.Name); c != 0 {
			return c
		}
		if lim[i].kind != lim[j].kind {
			return int(lim[i].kind) - int(lim[j].kind)
		}
		return strings.Compare(req.Hits[i].Key, req.Hits[j].Key)
	}
next:
	for i := range req.N {
		for _, j := range o.idx[:o.n] {
			if less(i, j) == 0 {
				continue next // a state already in the order
			}
		}
		// Insertion sort: at most MaxHits.
		k := o.n
		for k > 0 && less(i, o.idx[k-1]) < 0 {
			o.idx[k] = o.idx[k-1]
			k--
		}
		o.idx[k] = i
		o.n++
	}
	return o
}

// deadlockTries is how many times a statement that InnoDB chose as a
// deadlock's victim is run in all.
const deadlockTries = 4

// queryRetryingDeadlocks is queryString, run again when InnoDB chose the
// statement as the victim of a deadlock (error 1213): the server rolled
// its transaction back whole before it answered, so nothing was charged
// and running it again cannot charge twice. Two decisions lock their rows
// in one order, but InnoDB's gap locks, taken when a new state's empty row
// is inserted beside others, can still cross; it is rare (about one
// decision in a thousand under heavy contention on new keys), and costs
// one more round trip when it happens. Any other error is returned at once.
func (s *Store) queryRetryingDeadlocks(ctx context.Context, q string) (string, error) {
	for try := 1; ; try++ {
		reply, err := s.queryString(ctx, q)
		me, ok := errors.AsType[*mysql.MySQLError](err)
		if !ok || me.Number != errDeadlock || try == deadlockTries || ctx.Err() != nil {
			return reply, err
		}
	}
}

// queryString runs q, a statement whose first result is one row of one
// column, and returns that value.
func (s *Store) queryString(ctx context.Context, q string) (string, error) {
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return "", err
	}
	var v sql.RawBytes
	if rows.Next() {
		err = rows.Scan(&v)
	} else if err = rows.Err(); err == nil {
		err = errReply
	}
	out := string(v)
	// Close reads the CALL's trailing status; its error is the call's.
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return out, err
}

var errReply = errors.New("mysqlstore: malformed reply of the decide procedure")

// parseReply fills res from the decide procedure's reply: "now,evaluated"
// then five numbers per evaluated hit.
func parseReply(reply string, req *store.Request, res *store.Result, lim *[store.MaxHits]*limit) error {
	var vals [2 + 5*store.MaxHits]int64
	n := 0
	for f := range strings.SplitSeq(reply, ",") {
		if n == len(vals) {
			return errReply
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return errReply
		}
		vals[n] = v
		n++
	}
	if n < 2 {
		return errReply
	}
	hits := vals[1]
	if hits < 1 || hits > int64(req.N) || n != 2+5*int(hits) {
		return errReply
	}
	res.Now, res.N, res.Decider, res.Allowed = vals[0], int(hits), 0, true
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

// Release returns an error: the MySQL store holds no leases (no
// Concurrency limit registers), so a lease is never held
// (store.ErrLeaseNotHeld) or names a limit this store does not hold
// (store.ErrUnknownLimit). It does no I/O.
func (s *Store) Release(_ context.Context, lease store.Lease, _ int64) error {
	if !lease.Held() {
		return store.ErrLeaseNotHeld
	}
	if s.limits.Lookup(lease.Limit) == nil {
		return fmt.Errorf("%w: lease names limit %d", store.ErrUnknownLimit, lease.Limit)
	}
	return fmt.Errorf("store: lease names limit %d, which is not a concurrency limit", lease.Limit)
}

// MariaDB's error numbers that the store tells apart.
const (
	errNoSuchTable     = 1146 // ER_NO_SUCH_TABLE
	errNoSuchProcedure = 1305 // ER_SP_DOES_NOT_EXIST
	errStatementTime   = 1969 // ER_STATEMENT_TIMEOUT
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK
)

// failed maps the error of a call: the caller's ctx.Err() when its context
// ended, and otherwise an error matching store.ErrUnavailable, with a hint
// when the schema was never migrated or the server's deadline passed.
func (s *Store) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok {
		switch me.Number {
		case errNoSuchTable, errNoSuchProcedure:
			err = fmt.Errorf("mysqlstore: prefix %s is not migrated (call Migrate): %w", s.prefix, err)
		case errStatementTime:
			err = fmt.Errorf("mysqlstore: the server aborted the call after %v: %w", s.timeout, context.DeadlineExceeded)
		}
	}
	return store.Unavailable(err)
}

// schemaStatements returns the migration's statements for the store's
// names.
func (s *Store) schemaStatements() []string {
	src := strings.NewReplacer(
		"@state@", s.stateTable,
		"@decide@", object(s.prefix, "decide"),
		"@cleanup@", object(s.prefix, "cleanup"),
		"@window_at@", object(s.prefix, "window_at"),
		"@real_at@", object(s.prefix, "real_at"),
		"@members@", object(s.prefix, "members"),
		"@beat@", object(s.prefix, "beat"),
		"@refund@", object(s.prefix, "refund"),
	).Replace(schemaSrc)
	var out []string
	for part := range strings.SplitSeq(src, "\n-- ;;\n") {
		if p := bytes.TrimSpace([]byte(part)); len(p) > 0 {
			out = append(out, string(p))
		}
	}
	return out
}
