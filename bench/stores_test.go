package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcachestore"
	"github.com/sluicehq/sluice/store/mysqlstore"
	"github.com/sluicehq/sluice/store/pgstore"
	"github.com/sluicehq/sluice/store/redisstore"
)

// storeCallers is the number of concurrent callers of BenchmarkStores.
const storeCallers = 8

// postgresURL is the PostgreSQL of the benchmarks (SLUICE_POSTGRES_URL
// overrides).
func postgresURL() string {
	if u := os.Getenv("SLUICE_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable&connect_timeout=2"
}

// benchPostgres returns a migrated pgstore.Store in a schema of its own,
// dropped at the end, or skips when no PostgreSQL answers.
func benchPostgres(b *testing.B) *pgstore.Store {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(postgresURL())
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 2 * storeCallers
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		b.Skipf("no PostgreSQL (set SLUICE_POSTGRES_URL): %v", err)
	}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	schema := "sluice_bench_" + hex.EncodeToString(rb[:])
	b.Cleanup(func() { _, _ = p.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`) })
	s, err := pgstore.New(p, pgstore.WithSchema(schema), pgstore.WithTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}

// mysqlDSN is the MariaDB of the benchmarks (SLUICE_MYSQL_DSN overrides).
func mysqlDSN() string {
	if d := os.Getenv("SLUICE_MYSQL_DSN"); d != "" {
		return d
	}
	return "root@tcp(127.0.0.1:3306)/test?timeout=2s"
}

// benchMySQL returns a migrated mysqlstore.Store under a prefix of its
// own, dropped at the end, or skips when no MariaDB answers.
func benchMySQL(b *testing.B) *mysqlstore.Store {
	b.Helper()
	db, err := sql.Open("mysql", mysqlDSN())
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(2 * storeCallers)
	db.SetMaxIdleConns(2 * storeCallers)
	b.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		b.Skipf("no MariaDB (set SLUICE_MYSQL_DSN): %v", err)
	}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	s, err := mysqlstore.New(db, mysqlstore.WithPrefix("sluice_bench_"+hex.EncodeToString(rb[:])), mysqlstore.WithTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Drop(context.Background()) })
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}

// memcachedAddr is the memcached of the benchmarks (SLUICE_MEMCACHED_ADDR
// overrides).
func memcachedAddr() string {
	if a := os.Getenv("SLUICE_MEMCACHED_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:11211"
}

// benchMemcached returns a memcachestore.Store under a prefix of its own,
// or skips when no memcached answers.
func benchMemcached(b *testing.B) *memcachestore.Store {
	b.Helper()
	c := memcache.New(memcachedAddr())
	c.Timeout, c.MaxIdleConns = time.Second, 2*storeCallers
	b.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(); err != nil {
		b.Skipf("no memcached at %s (set SLUICE_MEMCACHED_ADDR): %v", memcachedAddr(), err)
	}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	s, err := memcachestore.New(c, memcachestore.WithPrefix("sluice-bench-"+hex.EncodeToString(rb[:])))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkStores: one decision of a daily fixed-window quota per op, over
// 1000 tenants, from exactly 8 concurrent callers, on store.Memory, on
// Redis (redisstore, one script call), on PostgreSQL (pgstore, one
// function call that commits a transaction), on MariaDB (mysqlstore, one
// procedure call that commits a transaction) and on memcached
// (memcachestore, one incr), in one run, with a limit that
// never rejects. Reported: decisions/s, and the latency of one decision at
// p50 and p99 (µs; every op is timed on the network stores, every 16th on
// Memory, where a clock read costs as much as the decision).
func BenchmarkStores(b *testing.B) {
	spec := store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: 1 << 40, Window: 24 * time.Hour}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	run := "sluice-stores-" + hex.EncodeToString(rb[:])
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "tenant:" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name  string
		every int // time every n-th op
		make  func(b *testing.B) store.Store
	}{
		{"memory", 16, func(*testing.B) store.Store { return store.NewMemory() }},
		{"redis", 1, func(b *testing.B) store.Store {
			c := benchClient(b)
			b.Cleanup(func() { cleanup(c, "{"+run+"}:*") })
			s, err := redisstore.New(c, redisstore.WithPrefix(run), redisstore.WithTimeout(time.Second))
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"postgres", 1, func(b *testing.B) store.Store { return benchPostgres(b) }},
		{"mariadb", 1, func(b *testing.B) store.Store { return benchMySQL(b) }},
		{"memcached", 1, func(b *testing.B) store.Store { return benchMemcached(b) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := tc.make(b)
			id, err := s.Register(context.Background(), spec)
			if err != nil {
				b.Fatal(err)
			}
			measureCallers(b, storeCallers, tc.every, func() func(i int) (bool, error) {
				var req store.Request
				var res store.Result
				return func(i int) (bool, error) {
					req.N, req.Now = 0, time.Now().UnixNano()
					req.Add(id, keys[i%len(keys)], 1)
					err := s.Decide(context.Background(), &req, &res)
					return res.Allowed, err
				}
			})
		})
	}
}

// measureCallers runs b.N decisions from exactly callers goroutines, each
// with a decide func of newDecide's (reusing its request and result), and
// reports what measure reports, and the p50 latency too; every th op is
// timed.
func measureCallers(b *testing.B, callers, every int, newDecide func() func(i int) (bool, error)) {
	b.Helper()
	var (
		t    tally
		next atomic.Int64
		wg   sync.WaitGroup
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for g := range callers {
		decide := newDecide()
		wg.Go(func() {
			var mine []time.Duration
			for i := int(next.Add(1)) - 1; i < b.N; i = int(next.Add(1)) - 1 {
				t.decide(decide, i+g*7919, i%every == 0, &mine)
			}
			t.keep(mine)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	t.report(b, elapsed)
	if len(t.lat) > 0 {
		b.ReportMetric(float64(t.lat[len(t.lat)/2].Nanoseconds())/1e3, "p50-µs")
	}
}

// tally is what a store benchmark's decide calls came to: failures,
// rejections and the latencies of the timed calls. It is safe for
// concurrent use; each goroutine keeps its latencies apart until keep.
type tally struct {
	failed, rejected atomic.Int64
	mu               sync.Mutex
	lat              []time.Duration
}

// decide makes decision i, appending its latency to *mine when timed, and
// counts a failure or a rejection.
func (t *tally) decide(decide func(i int) (bool, error), i int, timed bool, mine *[]time.Duration) {
	var t0 time.Time
	if timed {
		t0 = time.Now()
	}
	ok, err := decide(i)
	if timed {
		*mine = append(*mine, time.Since(t0))
	}
	if err != nil {
		t.failed.Add(1)
	} else if !ok {
		t.rejected.Add(1)
	}
}

// keep adds one goroutine's latencies to the tally.
func (t *tally) keep(mine []time.Duration) {
	t.mu.Lock()
	t.lat = append(t.lat, mine...)
	t.mu.Unlock()
}

// report fails b when a decision failed or was rejected, and reports
// decisions/s and the p99 latency (µs); it sorts the latencies.
func (t *tally) report(b *testing.B, elapsed time.Duration) {
	b.Helper()
	if n := t.failed.Load(); n > 0 {
		b.Fatalf("%d of %d decisions failed", n, b.N)
	}
	if n := t.rejected.Load(); n > 0 {
		b.Fatalf("%d of %d decisions rejected under a limit that never rejects", n, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	if len(t.lat) > 0 {
		slices.Sort(t.lat)
		b.ReportMetric(float64(t.lat[len(t.lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
}
