package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/mysqlstore"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestNewRefusesBadArguments(t *testing.T) {
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/test")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for name, opts := range map[string][]mysqlstore.Option{
		"nil option":      {nil},
		"empty prefix":    {mysqlstore.WithPrefix("")},
		"quote in prefix": {mysqlstore.WithPrefix("a`b")},
		"long prefix":     {mysqlstore.WithPrefix(strings.Repeat("p", 49))},
		"zero timeout":    {mysqlstore.WithTimeout(0)},
		"tiny timeout":    {mysqlstore.WithTimeout(time.Microsecond)},
	} {
		if _, err := mysqlstore.New(db, opts...); err == nil || !strings.HasPrefix(err.Error(), "mysqlstore: ") {
			t.Errorf("%s: %v, want an error starting with mysqlstore:", name, err)
		}
	}
	if _, err := mysqlstore.New(nil); err == nil {
		t.Error("a nil db: no error")
	}
}

func TestRegisterRefusesWhatItCannotKeep(t *testing.T) {
	db, _ := sql.Open("mysql", "root@tcp(127.0.0.1:1)/test")
	defer db.Close()
	s, err := mysqlstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []store.Spec{
		{Name: "sliding", Algorithm: store.SlidingWindow, Limit: 5, Window: time.Hour},
		{Name: "log", Algorithm: store.SlidingLog, Limit: 5, Window: time.Hour},
		{Name: "leases", Algorithm: store.Concurrency, Limit: 5, LeaseTTL: time.Minute},
		{Name: strings.Repeat("n", mysqlstore.MaxNameLen+1), Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour},
		{Name: "bad", Algorithm: store.FixedWindow, Limit: 0, Window: time.Hour},
	} {
		if _, err := s.Register(context.Background(), spec); err == nil || !strings.HasPrefix(err.Error(), "store: ") {
			t.Errorf("%.20s (%v): %v, want an error starting with store:", spec.Name, spec.Algorithm, err)
		}
	}
	ok := store.Spec{Name: strings.Repeat("n", mysqlstore.MaxNameLen), Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour}
	if _, err := s.Register(context.Background(), ok); err != nil {
		t.Errorf("a name of MaxNameLen bytes: %v", err)
	}
}

// TestNamesAndKeysAreBytes: keys and names that a case-insensitive or
// padding collation would merge ("a" and "A", "k" and "k ") are kept apart,
// and any bytes, the empty key included, are a key.
func TestNamesAndKeysAreBytes(t *testing.T) {
	s := newStore(t, sharedDB(t))
	lower := storetest.MustRegister(t, s, store.Spec{Name: "n", Algorithm: store.FixedWindow, Limit: 1, Window: time.Hour})
	upper := storetest.MustRegister(t, s, store.Spec{Name: "N", Algorithm: store.FixedWindow, Limit: 1, Window: time.Hour})
	for _, key := range []string{"a", "A", "k", "k ", "", "\x00", "\x00\xff", "é", strings.Repeat("x", mysqlstore.MaxKeyLen)} {
		for _, id := range []store.LimitID{lower, upper} {
			if res := storetest.Decide(t, s, id, key, 1); !res.Allowed {
				t.Fatalf("key %q of limit %d: first request rejected, merged with another key", key, id)
			}
			if res := storetest.Decide(t, s, id, key, 1); res.Allowed {
				t.Fatalf("key %q of limit %d: second request admitted over a limit of 1", key, id)
			}
		}
	}
	var req store.Request
	req.Add(lower, strings.Repeat("x", mysqlstore.MaxKeyLen+1), 1)
	if err := s.Decide(context.Background(), &req, new(store.Result)); err == nil || !strings.HasPrefix(err.Error(), "store: ") || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a key over MaxKeyLen: %v, want a bad-input error", err)
	}
}

// TestNotMigratedIsUnavailable: a Store whose table and procedures were
// never created fails with ErrUnavailable and says to call Migrate; it
// creates nothing by itself.
func TestNotMigratedIsUnavailable(t *testing.T) {
	db := sharedDB(t)
	s, err := mysqlstore.New(db, mysqlstore.WithPrefix(testPrefix()))
	if err != nil {
		t.Fatal(err)
	}
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 1, Window: time.Hour})
	var req store.Request
	req.Add(id, "k", 1)
	err = s.Decide(context.Background(), &req, new(store.Result))
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("Decide before Migrate: %v, want ErrUnavailable naming Migrate", err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", s.Prefix()+"_state").Scan(&n); err != nil || n != 0 {
		t.Fatalf("a table was created without Migrate: %d, %v", n, err)
	}
}

// TestMigrateIsIdempotentAndConcurrent: instances migrating at once, and
// again later, all succeed and keep the state counted.
func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	db := sharedDB(t)
	s := newStore(t, db)
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 3, Window: time.Hour})
	storetest.Decide(t, s, id, "k", 2)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			twin, err := mysqlstore.New(db, mysqlstore.WithPrefix(s.Prefix()))
			if err == nil {
				err = twin.Migrate(context.Background())
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if d := storetest.Decide(t, s, id, "k", 0).Decision(); d.Remaining != 1 {
		t.Fatalf("after Migrate again: Remaining %d, want 1 (usage kept)", d.Remaining)
	}
}

// rows counts the store's rows.
func rows(t *testing.T, db *sql.DB, s *mysqlstore.Store) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM `" + s.Prefix() + "_state`").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRejectionsAndReadOutsWriteNothing: a rejected request leaves no row
// behind for a key it named first (the empty rows that locked it are
// rolled back), and neither does a read-out.
func TestRejectionsAndReadOutsWriteNothing(t *testing.T) {
	db := sharedDB(t)
	s := newStore(t, db)
	small := storetest.MustRegister(t, s, store.Spec{Name: "small", Algorithm: store.FixedWindow, Limit: 1, Window: time.Hour})
	big := storetest.MustRegister(t, s, store.Spec{Name: "big", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Per(10, time.Hour)})
	storetest.Decide(t, s, small, "full", 1)
	if n := rows(t, db, s); n != 1 {
		t.Fatalf("after one admission: %d rows, want 1", n)
	}
	var req store.Request
	req.Add(big, "fresh", 1)
	req.Add(small, "full", 1)
	var res store.Result
	if err := s.Decide(context.Background(), &req, &res); err != nil || res.Allowed || res.Decider != 1 {
		t.Fatalf("a request whose second hit rejects: %v %+v", err, res)
	}
	storetest.Decide(t, s, big, "peeked", 0)
	if n := rows(t, db, s); n != 1 {
		t.Fatalf("after a rejection and a read-out: %d rows, want 1", n)
	}
	if d := storetest.Decide(t, s, big, "fresh", 0).Decision(); d.Remaining != 10 {
		t.Fatalf("the rejected request's first hit stayed charged: Remaining %d", d.Remaining)
	}
}

// TestUsageReadsTheWindowWithoutCharging: Usage of a daily and a monthly
// quota reports what was used, the window's bounds at midnight UTC and on
// the first of the month, and charges nothing.
func TestUsageReadsTheWindowWithoutCharging(t *testing.T) {
	s := newStore(t, sharedDB(t))
	ctx := context.Background()
	day := storetest.MustRegister(t, s, store.Spec{Name: "day", Algorithm: store.FixedWindow, Limit: 100, Window: 24 * time.Hour})
	month := storetest.MustRegister(t, s, store.Spec{Name: "month", Algorithm: store.FixedWindow, Limit: 1000, Calendar: store.Calendar{Months: 1}})
	bucket := storetest.MustRegister(t, s, store.Spec{Name: "bucket", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Per(10, time.Hour)})
	storetest.Decide(t, s, day, "acme", 7)
	storetest.Decide(t, s, month, "acme", 70)
	storetest.Decide(t, s, bucket, "acme", 3)
	for range 2 { // the second reading sees the same: the first charged nothing
		u, err := s.Usage(ctx, day, "acme")
		if err != nil {
			t.Fatal(err)
		}
		midnight := u.Now.Truncate(24 * time.Hour)
		if u.Used != 7 || u.Remaining != 93 || !u.Start.Equal(midnight) || !u.End.Equal(midnight.Add(24*time.Hour)) {
			t.Fatalf("daily usage %+v, want 7 used in [%v, +24h)", u, midnight)
		}
		m, err := s.Usage(ctx, month, "acme")
		if err != nil {
			t.Fatal(err)
		}
		first := time.Date(m.Now.Year(), m.Now.Month(), 1, 0, 0, 0, 0, time.UTC)
		if m.Used != 70 || !m.Start.Equal(first) || !m.End.Equal(first.AddDate(0, 1, 0)) || m.ResetAfter != m.End.Sub(m.Now) {
			t.Fatalf("monthly usage %+v, want 70 used from %v to a month later", m, first)
		}
		b, err := s.Usage(ctx, bucket, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if b.Used != 3 || !b.Start.IsZero() || b.ResetAfter <= 0 || b.ResetAfter > 18*time.Minute {
			t.Fatalf("bucket usage %+v, want 3 owed, full within 18m", b)
		}
	}
	if _, err := s.Usage(ctx, 999, "acme"); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Usage of an unknown limit: %v", err)
	}
}

// TestUnregister: a limit unregistered fails later calls with
// ErrUnknownLimit, its name registers again under a new ID, and Release
// never holds a lease.
func TestUnregister(t *testing.T) {
	s := newStore(t, sharedDB(t))
	ctx := context.Background()
	spec := store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 2, Window: time.Hour}
	id := storetest.MustRegister(t, s, spec)
	storetest.Decide(t, s, id, "k", 1)
	if err := s.Unregister(ctx, id); err != nil {
		t.Fatal(err)
	}
	var req store.Request
	req.Add(id, "k", 1)
	if err := s.Decide(ctx, &req, new(store.Result)); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Decide of an unregistered limit: %v", err)
	}
	if err := s.Unregister(ctx, id); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Unregister twice: %v", err)
	}
	again := storetest.MustRegister(t, s, spec)
	if again == id {
		t.Fatal("an ID was reused")
	}
	if err := s.Release(ctx, store.Lease{}, 0); !errors.Is(err, store.ErrLeaseNotHeld) {
		t.Fatalf("Release of the zero lease: %v", err)
	}
	if err := s.Release(ctx, store.Lease{Limit: id, ID: 1}, 0); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Release of an unregistered limit's lease: %v", err)
	}
}

// TestCleanupDeletesExpiredRowsAndSkipsLockedOnes: Cleanup deletes rows
// that expired, in batches of its limit, keeps live ones, and passes by a
// row that a decision holds locked instead of waiting for it.
func TestCleanupDeletesExpiredRowsAndSkipsLockedOnes(t *testing.T) {
	db := sharedDB(t)
	s := newStore(t, db)
	ctx := context.Background()
	table := "`" + s.Prefix() + "_state`"
	// Five expired rows and one live one, written directly.
	if _, err := db.Exec("INSERT INTO " + table + " (name, kind, k, a, b, expires) VALUES " +
		"('q', 2, 'e1', 1, 1, 1), ('q', 2, 'e2', 1, 1, 1), ('q', 2, 'e3', 1, 1, 1), ('q', 2, 'e4', 1, 1, 1)," +
		"('q', 2, 'held', 1, 1, 1), ('q', 2, 'live', 1, 1, 9223372036854775807)"); err != nil {
		t.Fatal(err)
	}
	// A transaction of the test's own holds one expired row, as a decision would.
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec("SELECT a FROM " + table + " WHERE name = 'q' AND kind = 2 AND k = 'held' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if n, err := s.Cleanup(cctx, 3); err != nil || n != 3 {
		t.Fatalf("first batch of 3: %d, %v", n, err)
	}
	if n, err := s.Cleanup(cctx, 3); err != nil || n != 1 {
		t.Fatalf("second batch: %d, %v; want 1 (the held row skipped)", n, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Cleanup(cctx, 3); err != nil || n != 1 {
		t.Fatalf("after the lock went: %d, %v; want the held row", n, err)
	}
	if n := rows(t, db, s); n != 1 {
		t.Fatalf("%d rows left, want the live one", n)
	}
	if _, err := s.Cleanup(ctx, 0); err == nil {
		t.Fatal("Cleanup(0): no error")
	}
}

// TestDeadlineRollsBackOnTheServer: a decision that waits on a lock past
// the store's deadline fails with ErrUnavailable within about the
// deadline, and the server aborts it too: once the lock goes, nothing of it
// was charged.
func TestDeadlineRollsBackOnTheServer(t *testing.T) {
	db := sharedDB(t)
	s := newStore(t, db, mysqlstore.WithTimeout(200*time.Millisecond))
	// The limit is charged and read through a second Store of the prefix,
	// with a deadline a loaded machine meets on a live server.
	patient, err := mysqlstore.New(db, mysqlstore.WithPrefix(s.Prefix()), mysqlstore.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour}
	id, patientID := storetest.MustRegister(t, s, spec), storetest.MustRegister(t, patient, spec)
	storetest.Decide(t, patient, patientID, "k", 1)
	tx, holder := holdRow(t, db, s, "k")
	var req store.Request
	req.Add(id, "k", 3)
	// The least of three tries: a loaded machine may take its time to give
	// up once, and none of them may charge anything.
	least := time.Duration(math.MaxInt64)
	for range 3 {
		start := time.Now()
		err := s.Decide(ctx, &req, new(store.Result))
		took := time.Since(start)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Decide behind a held lock: %v after %v, want ErrUnavailable", err, took)
		}
		least = min(least, took)
	}
	if least > time.Second {
		t.Fatalf("Decide behind a held lock: ErrUnavailable after %v at the least, want within about 200ms", least)
	}
	// The lock is released only once the server is done with the decision:
	// a statement that reached the server late may still be waiting for
	// it, and must be aborted there, not let through by the release.
	for deadline := time.Now().Add(5 * time.Second); ; {
		ids, err := decisionSessions(db, s, holder)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the timed-out decision still runs on the server after 5 s")
		}
		time.Sleep(5 * time.Millisecond) // a real server's statement: no virtual time
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if d := storetest.Decide(t, patient, patientID, "k", 0).Decision(); d.Remaining != 4 {
		t.Fatalf("after the lock went: Remaining %d, want 4 (the timed-out decisions charged nothing)", d.Remaining)
	}
}

// TestCallerCancelIsCtxErr: a caller's context that ends first yields its
// own error, not ErrUnavailable.
func TestCallerCancelIsCtxErr(t *testing.T) {
	s := newStore(t, sharedDB(t))
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var req store.Request
	req.Add(id, "k", 1)
	if err := s.Decide(ctx, &req, new(store.Result)); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Decide with a cancelled context: %v", err)
	}
}

// TestOverlappingRequestsNeitherFailNorOverAdmit: 16 callers race 2400
// requests of 1 to 4 hits over 30 keys, most of them new, in random order
// and with many rejections (so empty rows are inserted and rolled back
// under contention, where InnoDB's gap locks can deadlock two decisions).
// No decision fails (a deadlock victim, rolled back whole by the server,
// is decided again), and no key admits more than its limit.
func TestOverlappingRequestsNeitherFailNorOverAdmit(t *testing.T) {
	s := newStore(t, sharedDB(t))
	const limit, keys = 3, 30
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: limit, Window: time.Hour})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted = map[string]int{}
	)
	for g := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 21))
			for range 150 {
				var req store.Request
				for range 1 + r.IntN(4) {
					req.Add(id, fmt.Sprint("k", r.IntN(keys)), 1)
				}
				var res store.Result
				if err := s.Decide(context.Background(), &req, &res); err != nil {
					t.Errorf("Decide: %v", err)
					return
				}
				if res.Allowed {
					mu.Lock()
					for _, h := range req.Hits[:req.N] {
						admitted[h.Key]++
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for k, n := range admitted {
		if n > limit {
			t.Errorf("key %s admitted %d over a limit of %d", k, n, limit)
		}
	}
}
