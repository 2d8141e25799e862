package redisstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/redisstore"
)

// A Fallback decides on Redis while it answers. Here nothing listens on
// the address, so it decides locally at once, enforcing this instance's
// share of the global limit: a quarter of 100 with four instances.
func ExampleFallback() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:1", // down
		ContextTimeoutEnabled: true,          // required: the per-call deadline
	})
	defer client.Close()
	s, err := redisstore.New(client, redisstore.WithPrefix("example"), redisstore.WithTimeout(20*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := redisstore.NewFallback(s,
		fallback.WithInstances(4), // or counted through heartbeats
		fallback.WithTripAfter(1),
		fallback.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	id, _ := f.Register(ctx, store.Spec{Name: "api", Algorithm: store.FixedWindow, Limit: 100, Window: time.Minute})

	admitted := 0
	for range 100 {
		req := store.Request{Now: int64(time.Hour)} // the caller's monotonic clock
		req.Add(id, "tenant:42", 1)
		var res store.Result
		if err := f.Decide(ctx, &req, &res); err == nil && res.Allowed {
			admitted++
		}
	}
	st := f.Stats()
	fmt.Println("degraded:", st.Degraded, "share:", st.Share, "admitted:", admitted)
	h := f.Health() // what shed.Controller.Stats and promshed read
	fmt.Println("health: degraded:", h.Degraded, "instances:", h.Instances, "local decisions:", h.FallbackDecisions)
	// Output:
	// degraded: true share: 0.25 admitted: 25
	// health: degraded: true instances: 4 local decisions: 100
}

// New wraps the go-redis client the service already has. One Decide is
// one script call: here a per-IP token bucket and a per-account fixed
// window, all or nothing. (Not run: it needs a Redis.)
func ExampleNew() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true, // required: the per-call deadline bounds the I/O
		DialerRetries:         1,    // fail fast when the server refuses connections
	})
	defer client.Close()
	s, err := redisstore.New(client, redisstore.WithPrefix("myservice"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ip, _ := s.Register(ctx, store.Spec{Name: "ip", Algorithm: store.TokenBucket, Limit: 20,
		Rate: ratelimit.Per(10, time.Second)})
	account, _ := s.Register(ctx, store.Spec{Name: "account", Algorithm: store.FixedWindow, Limit: 1000,
		Window: time.Hour})

	var req store.Request
	req.Add(ip, "203.0.113.7", 1)
	req.Add(account, "acct-hash-5f2c", 1) // hashed: key names are not secret
	var res store.Result
	if err := s.Decide(ctx, &req, &res); err != nil {
		fmt.Println("fail open or closed:", err) // errors.Is(err, store.ErrUnavailable)
		return
	}
	fmt.Println(res.Allowed, res.Decision().RetryAfter)
}
