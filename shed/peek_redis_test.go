package shed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestPeekRedis: on a Redis store, as on Memory, a peek after two
// admissions reports Remaining limit-2 on every per-key rate algorithm
// and a hundred peeks charge nothing (the Redis at SLUICE_REDIS_ADDR,
// 127.0.0.1:6379 by default; skipped when it does not answer unless
// SLUICE_REQUIRE_REDIS=1). The windows are a day long, so that a test
// run does not straddle one's end on the server's clock.
func TestPeekRedis(t *testing.T) {
	addr := os.Getenv("SLUICE_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: time.Second, DialerRetries: 1})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // a loaded machine may miss 500ms
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		storetest.Missing(t, "SLUICE_REQUIRE_REDIS", "Redis at "+addr+" does not answer (point SLUICE_REDIS_ADDR at one)", err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := "sluice-test-peek-" + hex.EncodeToString(b[:])
	defer func() { // this test's keys only
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, "{"+prefix+"-*", 1000).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
	}()
	for _, rule := range peekRules() {
		if rule.Identity == Global {
			continue // decided in this process whatever the store
		}
		if rule.Window != 0 {
			rule.Window = 24 * time.Hour
		}
		t.Run(rule.Name, func(t *testing.T) {
			s, err := redisstore.New(client, redisstore.WithPrefix(prefix+"-"+rule.Name), redisstore.WithTimeout(2*time.Second)) // not the 20ms default: a loaded machine misses it
			if err != nil {
				t.Fatal(err)
			}
			peekChargesNothing(t, []Rule{rule}, WithStore(s), quiet())
		})
	}
}
