package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/redisstore"
)

// redisAddr is the Redis of the benchmarks (SLUICE_REDIS_ADDR overrides).
func redisAddr() string {
	if a := os.Getenv("SLUICE_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// benchClient returns a client of the benchmark Redis, or skips.
func benchClient(b *testing.B) *redis.Client {
	b.Helper()
	c := redis.NewClient(&redis.Options{Addr: redisAddr(), ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 64})
	b.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		b.Skipf("no Redis at %s (set SLUICE_REDIS_ADDR): %v", redisAddr(), err)
	}
	return c
}

// BenchmarkRedisGCRA: one token-bucket decision on Redis per op, over
// 1000 keys, from parallel goroutines, for sluice's Store (one EVALSHA of
// its general script) and go-redis/redis_rate (its GCRA script), against
// the same Redis, with limits that never reject. Reported: decisions/s
// and the p99 latency of a decision (µs), which is what the limiter adds
// to a request. sluice_degraded is a Fallback whose breaker is open: the
// local path, no Redis at all.
func BenchmarkRedisGCRA(b *testing.B) {
	const keys = 1000
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	run := "sluice-bench-" + hex.EncodeToString(rb[:])
	keyNames := make([]string, keys)
	for i := range keyNames {
		keyNames[i] = run + ":" + strconv.Itoa(i)
	}
	b.Run("sluice", func(b *testing.B) {
		c := benchClient(b)
		s, err := redisstore.New(c, redisstore.WithPrefix(run), redisstore.WithTimeout(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		id, err := s.Register(context.Background(), store.Spec{Name: "api", Algorithm: store.TokenBucket,
			Limit: 1 << 30, Rate: ratelimit.Per(1<<30, time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		measure(b, func() func(i int) (bool, error) {
			var req store.Request
			var res store.Result
			return func(i int) (bool, error) {
				req.N = 0
				req.Add(id, keyNames[i%keys], 1)
				err := s.Decide(context.Background(), &req, &res)
				return res.Allowed, err
			}
		})
		cleanup(c, "{"+run+"}:*")
	})
	b.Run("redisrate", func(b *testing.B) {
		c := benchClient(b)
		l := redis_rate.NewLimiter(c)
		limit := redis_rate.Limit{Rate: 1 << 30, Burst: 1 << 30, Period: time.Hour}
		measure(b, func() func(i int) (bool, error) {
			return func(i int) (bool, error) {
				res, err := l.Allow(context.Background(), keyNames[i%keys], limit)
				if err != nil {
					return false, err
				}
				return res.Allowed > 0, nil
			}
		})
		cleanup(c, "rate:"+run+":*")
	})
	b.Run("sluice_degraded", func(b *testing.B) {
		// Nothing listens on the port: the breaker opens on the first call.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		defer c.Close()
		s, err := redisstore.New(c, redisstore.WithPrefix(run))
		if err != nil {
			b.Fatal(err)
		}
		f, err := redisstore.NewFallback(s, fallback.WithTripAfter(1), fallback.WithInstances(1),
			fallback.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		id, err := f.Register(context.Background(), store.Spec{Name: "api", Algorithm: store.TokenBucket,
			Limit: 1 << 30, Rate: ratelimit.Per(1<<30, time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		var warm store.Request
		warm.Add(id, keyNames[0], 1)
		var res store.Result
		_ = f.Decide(context.Background(), &warm, &res)
		if !f.Stats().Degraded {
			b.Fatal("breaker not open")
		}
		measure(b, func() func(i int) (bool, error) {
			var req store.Request
			var res store.Result
			return func(i int) (bool, error) {
				req.N, req.Now = 0, int64(time.Hour)
				req.Add(id, keyNames[i%keys], 1)
				err := f.Decide(context.Background(), &req, &res)
				return res.Allowed, err
			}
		})
	})
}

// measure runs a decide func of newDecide's per parallel goroutine (each
// reuses its request and result, as a caller's pooled request object
// does), checks that every decision succeeded and admitted, and reports
// decisions/s and the p99 latency in µs (every 16th op is timed, so that
// the clock reads do not dominate the local path).
func measure(b *testing.B, newDecide func() func(i int) (bool, error)) {
	b.Helper()
	var (
		t         tally
		goroutine atomic.Int64
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		g := int(goroutine.Add(1)) * 7919
		decide := newDecide()
		var mine []time.Duration
		for i := g; pb.Next(); i++ {
			t.decide(decide, i, i%16 == 0, &mine)
		}
		t.keep(mine)
	})
	elapsed := time.Since(start)
	b.StopTimer()
	t.report(b, elapsed)
}

// cleanup deletes the benchmark's keys (they carry TTLs anyway).
func cleanup(c *redis.Client, pattern string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
}
