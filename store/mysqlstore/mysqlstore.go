package mysqlstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/internal/membership"
	"github.com/sluicehq/sluice/store/internal/sqlquota"
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
	// (fallback.Membership); fallbacks is the one instance that the
	// Fallbacks around it count as.
	instance  string
	fallbacks *membership.Instance

	limits sqlquota.Limits // by LimitID, with the names in use
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Updater  = (*Store)(nil)
	_ store.Resetter = (*Store)(nil)
	_ store.Refunder = (*Store)(nil)
)

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
	s := &Store{
		db:         db,
		prefix:     cfg.prefix,
		timeout:    cfg.timeout,
		set:        "SET STATEMENT max_statement_time=" + strconv.FormatFloat(serverTimeout(cfg.timeout).Seconds(), 'f', 6, 64) + " FOR ",
		decideSQL:  "CALL " + object(cfg.prefix, "decide") + "('",
		refundSQL:  "CALL " + object(cfg.prefix, "refund") + "('",
		stateTable: object(cfg.prefix, "state"),
		cleanupSQL: "CALL " + object(cfg.prefix, "cleanup") + "(",
		instance:   rand.Text(),
		limits:     sqlquota.Limits{Backend: "MySQL", Package: "mysqlstore", MaxName: MaxNameLen, MaxKey: MaxKeyLen},
	}
	s.fallbacks = membership.New("MariaDB", s.beat)
	return s, nil
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
	return s.limits.Register(spec)
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
	return s.limits.Update(id, spec)
}

// Unregister drops limit id from this Store, without I/O (see
// store.Store): later calls naming id fail with store.ErrUnknownLimit, and
// its name may be registered again. Its rows are not deleted (other Stores
// of the prefix may share them); Cleanup deletes them once expired. It
// returns an error matching store.ErrUnknownLimit when id is not
// registered.
func (s *Store) Unregister(_ context.Context, id store.LimitID) error {
	return s.limits.Unregister(id)
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
	var lim [store.MaxHits]*sqlquota.Limit
	if err := s.limits.Decision(req, res, &lim); err != nil {
		return err
	}
	q := s.hitsQuery(s.decideSQL, req, &lim, nil)
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

// hitsQuery returns the statement that calls proc (decide's or refund's
// "CALL name('") on req: the hits and the lock order as JSON string
// literals, then for a refund (admitted, the admitting result; nil for a
// decision) its instant, a number, and the instant each hit's admission
// left its token bucket full (sqlquota.PaidOff), a JSON string literal.
// Names and keys travel in hex and numbers in decimal, so the literals
// hold no quote or backslash whatever the input or SQL mode.
func (s *Store) hitsQuery(proc string, req *store.Request, lim *[store.MaxHits]*sqlquota.Limit, admitted *store.Result) string {
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
		writeHex(&b, l.Spec.Name)
		b.WriteByte('"')
		field(int64(l.Kind))
		b.WriteString(`,"`)
		writeHex(&b, h.Key)
		b.WriteByte('"')
		field(h.Cost)
		field(l.Spec.Limit)
		field(l.Param)
		field(int64(l.Clock.Shift()))
		field(int64(l.Clock.Months()))
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
	b.WriteString("]'")
	if admitted != nil {
		b.WriteString(", ")
		b.Write(strconv.AppendInt(num[:0], admitted.Now, 10))
		b.WriteString(", '[")
		for i := range req.N {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('"')
			b.Write(strconv.AppendInt(num[:0], sqlquota.PaidOff(admitted, i), 10))
			b.WriteByte('"')
		}
		b.WriteString("]'")
	}
	b.WriteByte(')')
	return b.String()
}

// writeHex writes v's bytes to b in lower-case hex.
func writeHex(b *strings.Builder, v string) {
	const digits = "0123456789abcdef"
	for j := 0; j < len(v); j++ {
		b.WriteByte(digits[v[j]>>4])
		b.WriteByte(digits[v[j]&15])
	}
}

// hitOrder is the indexes of a request's distinct states, sorted.
type hitOrder struct {
	idx [store.MaxHits]int
	n   int
}

// lockOrder returns the first hit of each distinct state of req, ordered
// by (name, kind, key) bytes: the one order in which every decision locks
// its states, so that two decisions never wait for each other in a cycle.
func lockOrder(req *store.Request, lim *[store.MaxHits]*sqlquota.Limit) hitOrder {
	var o hitOrder
	less := func(i, j int) int {
		if c := strings.Compare(lim[i].Spec.Name, lim[j].Spec.Name); c != 0 {
			return c
		}
		if lim[i].Kind != lim[j].Kind {
			return int(lim[i].Kind) - int(lim[j].Kind)
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
func parseReply(reply string, req *store.Request, res *store.Result, lim *[store.MaxHits]*sqlquota.Limit) error {
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
	if !sqlquota.Decode(vals[:n], req, res, lim) {
		return errReply
	}
	return nil
}

// Release returns an error: the MySQL store holds no leases (no
// Concurrency limit registers), so a lease is never held
// (store.ErrLeaseNotHeld) or names a limit this store does not hold
// (store.ErrUnknownLimit). It does no I/O.
func (s *Store) Release(_ context.Context, lease store.Lease, _ int64) error {
	return s.limits.ReleaseNone(lease)
}

// MariaDB's error numbers that the store tells apart.
const (
	errNoSuchTable     = 1146 // ER_NO_SUCH_TABLE
	errNoSuchProcedure = 1305 // ER_SP_DOES_NOT_EXIST
	errProcedureArgs   = 1318 // ER_SP_WRONG_NO_OF_ARGS: a procedure of a former version
	errStatementTime   = 1969 // ER_STATEMENT_TIMEOUT
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK
)

// failed maps the error of a call: the caller's ctx.Err() when its context
// ended, and otherwise an error matching store.ErrUnavailable, with a hint
// when the schema was never migrated (or not since an upgrade) or the
// server's deadline passed.
func (s *Store) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok {
		switch me.Number {
		case errNoSuchTable, errNoSuchProcedure, errProcedureArgs:
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

// serverTimeout is the server's share of a call's deadline d: three
// quarters of it (at least a millisecond), so that a statement that
// reached the server within the first quarter is aborted there, and rolled
// back, before the client gives up on it.
func serverTimeout(d time.Duration) time.Duration {
	return max(time.Millisecond, d/4*3)
}
