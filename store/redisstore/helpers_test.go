package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store/storetest"
)

// sharedAddr is the shared Redis of the correctness tests.
func sharedAddr() string {
	if a := os.Getenv("SLUICE_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// newClient returns a client of addr as the store wants it (context
// deadlines honoured), closed at the end of the test.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		DialerRetries:         1,
		PoolSize:              64,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// sharedClient returns a client of the shared Redis, or skips the test
// when it does not answer (fails it under SLUICE_REQUIRE_REDIS=1).
func sharedClient(t testing.TB) *redis.Client {
	t.Helper()
	c := newClient(t, sharedAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		storetest.Missing(t, "SLUICE_REQUIRE_REDIS", "Redis at "+sharedAddr()+" does not answer (point SLUICE_REDIS_ADDR at one)", err)
	}
	return c
}

// testPrefix returns a key prefix unique to this run and call, and deletes
// the keys under it when the test ends (nothing else is touched).
func testPrefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	p := "sluice-test-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { deletePrefix(c, p) })
	return p
}

func deletePrefix(c redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	del := func(cl redis.UniversalClient) {
		// The store's keys, and those under key tags (WithKeyTags).
		for _, match := range []string{"{" + prefix + "}:*", "{" + prefix + ":*"} {
			iter := cl.Scan(ctx, 0, match, 1000).Iterator()
			for iter.Next(ctx) {
				cl.Del(ctx, iter.Val())
			}
		}
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { del(n); return nil })
		return
	}
	del(c)
}
