package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/pgstore"
)

// A monthly quota on PostgreSQL registers without I/O; a per-IP sliding
// log does not register at all (keep it on Memory or Redis). Here nothing
// listens on the database's address, so the decision fails with
// store.ErrUnavailable, within the store's deadline, and the caller's
// failure policy decides.
func ExampleStore() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://sluice@127.0.0.1:1/quotas?connect_timeout=1") // down
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	s, err := pgstore.New(pool, pgstore.WithSchema("quotas"), pgstore.WithTimeout(50*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	monthly, err := s.Register(ctx, store.Spec{Name: "api-calls", Algorithm: store.FixedWindow, Limit: 100_000,
		Calendar: store.Calendar{Months: 1}}) // from the 1st, 00:00 UTC
	fmt.Println("monthly quota:", monthly, err)
	_, err = s.Register(ctx, store.Spec{Name: "login-ip", Algorithm: store.SlidingLog, Limit: 5, Window: time.Minute})
	fmt.Println(err)

	var req store.Request
	req.Add(monthly, "tenant:acme", 1)
	var res store.Result
	err = s.Decide(ctx, &req, &res)
	fmt.Println("unavailable:", errors.Is(err, store.ErrUnavailable))
	// Output:
	// monthly quota: 1 <nil>
	// store: limit "login-ip": the PostgreSQL store keeps token buckets, fixed and sliding windows, not sliding_log; use store.Memory or redisstore for it
	// unavailable: true
}

// A deployment migrates once, decides per request, reads a tenant's use for
// billing, and deletes expired rows from a ticker.
func ExampleStore_Usage() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://sluice@db.internal:5432/quotas")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil { // at deployment: never implicit
		log.Fatal(err)
	}
	daily, err := s.Register(ctx, store.Spec{Name: "uploads", Algorithm: store.FixedWindow, Limit: 1000, Window: 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		for range time.Tick(time.Minute) {
			for {
				n, err := s.Cleanup(ctx, 1000)
				if err != nil || n < 1000 {
					break
				}
			}
		}
	}()

	var req store.Request
	req.Add(daily, "tenant:acme", 1)
	var res store.Result
	if err := s.Decide(ctx, &req, &res); err == nil && !res.Allowed {
		fmt.Println("over quota; retry in", res.Decision().RetryAfter)
	}
	u, err := s.Usage(ctx, daily, "tenant:acme")
	if err == nil {
		fmt.Printf("acme used %d of %d from %v to %v\n", u.Used, u.Limit, u.Start, u.End)
	}
}
