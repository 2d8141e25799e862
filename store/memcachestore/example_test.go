package memcachestore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcachestore"
)

// A daily fixed window registers on Memcached; a token bucket does not
// (memcached cannot decide it atomically). Here nothing listens on the
// server's address, so the decision fails with store.ErrUnavailable within
// the client's Timeout, and the caller's failure policy (or NewFallback)
// decides.
func ExampleStore() {
	ctx := context.Background()
	c := memcache.New("127.0.0.1:1") // down
	c.Timeout = 50 * time.Millisecond
	s, err := memcachestore.New(c, memcachestore.WithPrefix("quotas"))
	if err != nil {
		fmt.Println(err)
		return
	}
	daily, err := s.Register(ctx, store.Spec{Name: "api-calls", Algorithm: store.FixedWindow, Limit: 10_000, Window: 24 * time.Hour})
	fmt.Println("daily quota:", daily, err)
	_, err = s.Register(ctx, store.Spec{Name: "burst", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Per(1, time.Second)})
	fmt.Println(err != nil)

	req := store.Request{Now: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()}
	req.Add(daily, "tenant:acme", 1)
	var res store.Result
	err = s.Decide(ctx, &req, &res)
	fmt.Println("unavailable:", errors.Is(err, store.ErrUnavailable))
	// Output:
	// daily quota: 1 <nil>
	// true
	// unavailable: true
}
