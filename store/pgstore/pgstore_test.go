package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/pgstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestNoSchemaUntilMigrate: a Store creates nothing at first use; before
// Migrate its decisions fail with store.ErrUnavailable naming Migrate, and
// afterwards they succeed.
func TestNoSchemaUntilMigrate(t *testing.T) {
	p := sharedPool(t)
	ctx := context.Background()
	name := testSchema(t, p)
	s, err := pgstore.New(p, pgstore.WithSchema(name))
	if err != nil {
		t.Fatal(err)
	}
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 3, Window: time.Hour})
	var req store.Request
	req.Add(id, "k", 1)
	var res store.Result
	err = s.Decide(ctx, &req, &res)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("Decide before Migrate: %v, want store.ErrUnavailable naming Migrate", err)
	}
	var exists bool
	if err := p.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatal("the schema exists before Migrate")
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if res := storetest.Decide(t, s, id, "k", 1); !res.Allowed {
		t.Fatalf("after Migrate: %+v", res)
	}
}

// TestMigrateConcurrentlyAndAgain: instances migrating one schema at once
// all succeed, Migrate again changes nothing, and the state survives it.
func TestMigrateConcurrentlyAndAgain(t *testing.T) {
	p := sharedPool(t)
	ctx := context.Background()
	name := testSchema(t, p)
	var stores []*pgstore.Store
	for range 4 {
		s, err := pgstore.New(p, pgstore.WithSchema(name), pgstore.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Migrate %d: %v", i, err)
		}
	}
	spec := store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 3, Window: time.Hour}
	id := storetest.MustRegister(t, stores[0], spec)
	storetest.Decide(t, stores[0], id, "k", 2)
	if err := stores[1].Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	id1 := storetest.MustRegister(t, stores[1], spec)
	if d := storetest.Decide(t, stores[1], id1, "k", 0).Decision(); d.Remaining != 1 {
		t.Fatalf("another instance after Migrate again: Remaining %d, want 1", d.Remaining)
	}
}

// TestRegisterRefusesAbuseLimitAlgorithms: sliding logs and leases are a
// Register error that points to Memory and Redis.
func TestRegisterRefusesAbuseLimitAlgorithms(t *testing.T) {
	p := sharedPool(t)
	s := newStore(t, p)
	for _, spec := range []store.Spec{
		{Name: "l", Algorithm: store.SlidingLog, Limit: 5, Window: time.Minute},
		{Name: "c", Algorithm: store.Concurrency, Limit: 5, LeaseTTL: time.Minute},
	} {
		_, err := s.Register(context.Background(), spec)
		if err == nil || !strings.HasPrefix(err.Error(), "store: ") || !strings.Contains(err.Error(), "redisstore") {
			t.Errorf("Register(%v): %v, want a store: error pointing to Memory or redisstore", spec.Algorithm, err)
		}
	}
}

// TestTwoHitsOnOneKeySeeEachOther: hits of one request on one state add
// up, and a request they overrun together charges neither.
func TestTwoHitsOnOneKeySeeEachOther(t *testing.T) {
	p := sharedPool(t)
	s := newStore(t, p)
	for _, spec := range []store.Spec{
		{Name: "f", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour},
		{Name: "b", Algorithm: store.TokenBucket, Limit: 5, Rate: ratelimit.Per(5, 24*time.Hour)},
	} {
		id := storetest.MustRegister(t, s, spec)
		ctx := context.Background()
		var req store.Request
		req.Add(id, "k", 3)
		req.Add(id, "k", 3)
		var res store.Result
		if err := s.Decide(ctx, &req, &res); err != nil {
			t.Fatal(err)
		}
		if res.Allowed || res.Decider != 1 {
			t.Fatalf("%v: 3+3 of 5 on one key: %+v", spec.Algorithm, res)
		}
		if d := storetest.Decide(t, s, id, "k", 0).Decision(); d.Remaining != 5 {
			t.Fatalf("%v: a rejected request was charged: Remaining %d", spec.Algorithm, d.Remaining)
		}
		req = store.Request{}
		req.Add(id, "k", 2)
		req.Add(id, "k", 2)
		if err := s.Decide(ctx, &req, &res); err != nil {
			t.Fatal(err)
		}
		if !res.Allowed || res.Decider != 1 || res.Hits[1].Decision.Remaining != 1 {
			t.Fatalf("%v: 2+2 of 5 on one key: %+v", spec.Algorithm, res)
		}
		if d := storetest.Decide(t, s, id, "k", 0).Decision(); d.Remaining != 1 {
			t.Fatalf("%v: after 2+2: Remaining %d, want 1", spec.Algorithm, d.Remaining)
		}
	}
}

// TestOppositeOrdersNeverDeadlock: requests naming two keys in opposite
// orders, at once, all decide (a deadlock would fail some with an error),
// and exactly the limit of them is admitted.
func TestOppositeOrdersNeverDeadlock(t *testing.T) {
	p := sharedPool(t)
	s := newStore(t, p)
	a := storetest.MustRegister(t, s, store.Spec{Name: "a", Algorithm: store.FixedWindow, Limit: 20, Window: time.Hour})
	b := storetest.MustRegister(t, s, store.Spec{Name: "b", Algorithm: store.TokenBucket, Limit: 20, Rate: ratelimit.Per(20, 24*time.Hour)})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
		errs    []error
	)
	for i := range 60 {
		wg.Go(func() {
			var req store.Request
			if i%2 == 0 {
				req.Add(a, "x", 1)
				req.Add(b, "y", 1)
			} else {
				req.Add(b, "y", 1)
				req.Add(a, "x", 1)
			}
			var res store.Result
			err := s.Decide(context.Background(), &req, &res)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if res.Allowed {
				allowed++
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of 60 failed, first: %v", len(errs), errs[0])
	}
	if allowed != 20 {
		t.Fatalf("%d admitted, want 20", allowed)
	}
}

// TestUsageReadsTheWindowWithoutCharging: Usage reports what a key used of
// its current window and the window's bounds on the database's clock (a
// day from midnight UTC, a calendar month from its first), and reading it
// charges nothing.
func TestUsageReadsTheWindowWithoutCharging(t *testing.T) {
	p := sharedPool(t)
	s := newStore(t, p)
	ctx := context.Background()
	day := storetest.MustRegister(t, s, store.Spec{Name: "day", Algorithm: store.FixedWindow, Limit: 10, Window: 24 * time.Hour})
	month := storetest.MustRegister(t, s, store.Spec{Name: "month", Algorithm: store.FixedWindow, Limit: 1000,
		Calendar: store.Calendar{Months: 1, Offset: -5 * time.Hour}})
	bucket := storetest.MustRegister(t, s, store.Spec{Name: "bucket", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Per(10, 24*time.Hour)})
	storetest.Decide(t, s, day, "acme", 3)
	storetest.Decide(t, s, month, "acme", 40)
	storetest.Decide(t, s, bucket, "acme", 4)
	for range 2 {
		u, err := s.Usage(ctx, day, "acme")
		if err != nil {
			t.Fatal(err)
		}
		midnight := u.Now.Truncate(24 * time.Hour)
		if u.Limit != 10 || u.Used != 3 || u.Remaining != 7 || !u.Start.Equal(midnight) || !u.End.Equal(midnight.Add(24*time.Hour)) ||
			u.ResetAfter != u.End.Sub(u.Now) {
			t.Fatalf("day: %+v", u)
		}
		u, err = s.Usage(ctx, month, "acme")
		if err != nil {
			t.Fatal(err)
		}
		local := u.Now.In(time.FixedZone("", -5*3600))
		first := time.Date(local.Year(), local.Month(), 1, 0, 0, 0, 0, local.Location())
		if u.Used != 40 || !u.Start.Equal(first) || !u.End.Equal(first.AddDate(0, 1, 0)) {
			t.Fatalf("month: %+v, want from %v", u, first)
		}
		u, err = s.Usage(ctx, bucket, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if u.Used != 4 || u.Remaining != 6 || !u.Start.IsZero() || u.ResetAfter <= 0 {
			t.Fatalf("bucket: %+v", u)
		}
	}
	if u, err := s.Usage(ctx, day, "nobody"); err != nil || u.Used != 0 || u.Remaining != 10 {
		t.Fatalf("a fresh key: %+v, %v", u, err)
	}
	if _, err := s.Usage(ctx, 99, "acme"); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Usage of an unknown limit: %v", err)
	}
}

// TestResetGivesOneKeyItsQuotaBack: Reset forgets one key of one limit,
// on every Store of the schema, and no other key.
func TestResetGivesOneKeyItsQuotaBack(t *testing.T) {
	p := sharedPool(t)
	s := newStore(t, p)
	ctx := context.Background()
	spec := store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 2, Window: 24 * time.Hour}
	id := storetest.MustRegister(t, s, spec)
	other, err := pgstore.New(p, pgstore.WithSchema(s.SchemaName()), pgstore.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	oid := storetest.MustRegister(t, other, spec)
	storetest.Decide(t, s, id, "acme", 2)
	storetest.Decide(t, s, id, "globex", 2)
	if res := storetest.Decide(t, other, oid, "acme", 1); res.Allowed {
		t.Fatal("acme admitted over its quota")
	}
	if err := s.Reset(ctx, id, "acme"); err != nil {
		t.Fatal(err)
	}
	if res := storetest.Decide(t, other, oid, "acme", 2); !res.Allowed {
		t.Fatalf("acme after Reset: %+v", res.Decision())
	}
	if d := storetest.Decide(t, s, id, "globex", 0).Decision(); d.Remaining != 0 {
		t.Fatalf("globex was reset too: Remaining %d", d.Remaining)
	}
	if err := s.Reset(ctx, id, "never-seen"); err != nil {
		t.Fatalf("Reset of a key without state: %v", err)
	}
	if err := s.Reset(ctx, 99, "acme"); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Reset of an unknown limit: %v", err)
	}
}

// TestUnregisterThenRegisterAgain: an unregistered limit is unknown to
// Decide, Usage, Reset and Unregister; its name registers again under a
// new id, which meets the name's state.
func TestUnregisterThenRegisterAgain(t *testing.T) {
	p := sharedPool(t)
	s := newStore(t, p)
	ctx := context.Background()
	spec := store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 3, Window: time.Hour}
	id := storetest.MustRegister(t, s, spec)
	storetest.Decide(t, s, id, "k", 1)
	if err := s.Unregister(ctx, id); err != nil {
		t.Fatal(err)
	}
	var req store.Request
	req.Add(id, "k", 1)
	var res store.Result
	if err := s.Decide(ctx, &req, &res); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Decide after Unregister: %v", err)
	}
	if err := s.Unregister(ctx, id); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Unregister again: %v", err)
	}
	if _, err := s.Usage(ctx, id, "k"); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("Usage after Unregister: %v", err)
	}
	again := storetest.MustRegister(t, s, spec)
	if again == id {
		t.Fatalf("the id %d was reused", id)
	}
	if d := storetest.Decide(t, s, again, "k", 0).Decision(); d.Remaining != 2 {
		t.Fatalf("registered again: Remaining %d, want 2 (the name's state)", d.Remaining)
	}
}

// TestCleanupDeletesExpiredRowsInBatchesAndSkipsLockedOnes: Cleanup deletes
// only rows that expired, at most limit per call, and passes by a row that
// a transaction holds locked instead of waiting for it.
func TestCleanupDeletesExpiredRowsInBatchesAndSkipsLockedOnes(t *testing.T) {
	p := sharedPool(t)
	s := newStore(t, p)
	ctx := context.Background()
	id := storetest.MustRegister(t, s, store.Spec{Name: "b", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Per(10, 24*time.Hour)})
	for i := range 6 {
		storetest.Decide(t, s, id, fmt.Sprint("old", i), 1)
	}
	storetest.Decide(t, s, id, "live", 1)
	table := `"` + s.SchemaName() + `".state`
	// A bucket whose arrival time has passed is full: an expired row, as
	// time would leave it.
	if _, err := p.Exec(ctx, "UPDATE "+table+" SET a = 1, expires = 1 WHERE key LIKE 'old%'"); err != nil {
		t.Fatal(err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+table+" WHERE key = 'old0' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var got []int64
	for {
		n, err := s.Cleanup(cctx, 2)
		if err != nil {
			t.Fatalf("Cleanup (a row is locked): %v", err)
		}
		got = append(got, n)
		if n < 2 {
			break
		}
	}
	if fmt.Sprint(got) != "[2 2 1]" {
		t.Fatalf("Cleanup(2) deleted %v, want [2 2 1] (5 expired rows free, 1 locked)", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Cleanup(ctx, 100); err != nil || n != 1 {
		t.Fatalf("Cleanup once the lock is gone: %d, %v, want 1", n, err)
	}
	var left []string
	rows, err := p.Query(ctx, "SELECT convert_from(key, 'UTF8') FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		left = append(left, k)
	}
	if rows.Err() != nil || fmt.Sprint(left) != "[live]" {
		t.Fatalf("rows left: %v (%v), want [live]", left, rows.Err())
	}
	if d := storetest.Decide(t, s, id, "live", 0).Decision(); d.Remaining != 9 {
		t.Fatalf("the live key after Cleanup: Remaining %d, want 9", d.Remaining)
	}
	if _, err := s.Cleanup(ctx, 0); err == nil {
		t.Fatal("Cleanup(0) is no error")
	}
}

// TestNewValidates: a nil pool, a nil option, an empty schema name and a
// timeout that is not positive are errors.
func TestNewValidates(t *testing.T) {
	p := newPool(t, sharedURL()) // no I/O: the pool connects lazily
	for name, f := range map[string]func() error{
		"nil pool":      func() error { _, err := pgstore.New(nil); return err },
		"nil option":    func() error { _, err := pgstore.New(p, nil); return err },
		"empty schema":  func() error { _, err := pgstore.New(p, pgstore.WithSchema("")); return err },
		"long schema":   func() error { _, err := pgstore.New(p, pgstore.WithSchema(strings.Repeat("s", 64))); return err },
		"zero timeout":  func() error { _, err := pgstore.New(p, pgstore.WithTimeout(0)); return err },
		"negative wait": func() error { _, err := pgstore.New(p, pgstore.WithTimeout(-time.Second)); return err },
	} {
		if err := f(); err == nil || !strings.HasPrefix(err.Error(), "pgstore: ") {
			t.Errorf("%s: %v, want a pgstore: error", name, err)
		}
	}
}

// TestAnyKeyBytesAreAKey: a key is any string of bytes, as on Memory and
// Redis (a NUL, invalid UTF-8, a binary hash), kept apart from every
// other key.
func TestAnyKeyBytesAreAKey(t *testing.T) {
	p := sharedPool(t)
	s := newStore(t, p)
	ctx := context.Background()
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 1, Window: time.Hour})
	keys := []string{"a\x00b", "a\x00c", "\xff\xfe", "\xff", ""}
	for _, k := range keys {
		if res := storetest.Decide(t, s, id, k, 1); !res.Allowed {
			t.Fatalf("key %q: first request rejected: %+v", k, res.Decision())
		}
	}
	for _, k := range keys {
		if res := storetest.Decide(t, s, id, k, 1); res.Allowed {
			t.Fatalf("key %q: second request admitted over a limit of 1", k)
		}
		if u, err := s.Usage(ctx, id, k); err != nil || u.Used != 1 {
			t.Fatalf("key %q: Usage %+v, %v", k, u, err)
		}
	}
	if err := s.Reset(ctx, id, "a\x00b"); err != nil {
		t.Fatal(err)
	}
	if res := storetest.Decide(t, s, id, "a\x00b", 1); !res.Allowed {
		t.Fatal("a key with a NUL was not reset")
	}
	if res := storetest.Decide(t, s, id, "a\x00c", 1); res.Allowed {
		t.Fatal("Reset of one key freed another")
	}
}

// TestRegisterRefusesANameTheDatabaseCannotStore: a limit's name is text in
// PostgreSQL, so a name with a NUL or invalid UTF-8 is a Register error, not
// a store that fails every decision.
func TestRegisterRefusesANameTheDatabaseCannotStore(t *testing.T) {
	p := newPool(t, sharedURL()) // no I/O
	s, err := pgstore.New(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a\x00b", "\xff"} {
		spec := store.Spec{Name: name, Algorithm: store.FixedWindow, Limit: 1, Window: time.Hour}
		if _, err := s.Register(context.Background(), spec); err == nil || !strings.HasPrefix(err.Error(), "store: ") {
			t.Errorf("Register(name %q): %v, want a store: error", name, err)
		}
	}
}

// TestUsageNeverWaitsOnADecision: a read-out (Usage, or a Decide of cost
// 0 only) takes no lock, so a status page never waits on a key that a
// decision holds, nor makes it wait.
func TestUsageNeverWaitsOnADecision(t *testing.T) {
	p := sharedPool(t)
	s := newStore(t, p)
	ctx := context.Background()
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: 24 * time.Hour})
	storetest.Decide(t, s, id, "k", 2)
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM "`+s.SchemaName()+`".state WHERE key = 'k' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	fast, err := pgstore.New(p, pgstore.WithSchema(s.SchemaName()), pgstore.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	fid := storetest.MustRegister(t, fast, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: 24 * time.Hour})
	u, err := fast.Usage(ctx, fid, "k")
	if err != nil || u.Used != 2 {
		t.Fatalf("Usage while a decision holds the key: %+v, %v, want Used 2 at once", u, err)
	}
}

// TestDecideRacingUnregister: decisions racing with Unregister either
// decide on the limit or fail with store.ErrUnknownLimit, never anything
// else, and none admits over the limit.
func TestDecideRacingUnregister(t *testing.T) {
	p := sharedPool(t)
	s := newStore(t, p)
	ctx := context.Background()
	id := storetest.MustRegister(t, s, store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 10, Window: 24 * time.Hour})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
		bad     []error
	)
	start := make(chan struct{})
	for range 30 {
		wg.Go(func() {
			<-start
			var req store.Request
			req.Add(id, "k", 1)
			var res store.Result
			err := s.Decide(ctx, &req, &res)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && res.Allowed:
				allowed++
			case err != nil && !errors.Is(err, store.ErrUnknownLimit):
				bad = append(bad, err)
			}
		})
	}
	close(start)
	if err := s.Unregister(ctx, id); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(bad) > 0 || allowed > 10 {
		t.Fatalf("%d admitted (at most 10), errors other than ErrUnknownLimit: %v", allowed, bad)
	}
}
