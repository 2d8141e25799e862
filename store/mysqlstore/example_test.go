package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/mysqlstore"
)

// A monthly quota on MariaDB registers without I/O; a sliding window does
// not register at all (keep it on Memory or Redis). Here nothing listens
// on the database's address, so the decision fails with
// store.ErrUnavailable, within the store's deadline, and the caller's
// failure policy decides. In production: Migrate once at start-up, and
// Cleanup from a ticker.
func ExampleStore() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "sluice@tcp(127.0.0.1:1)/quotas?timeout=1s") // down
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	s, err := mysqlstore.New(db, mysqlstore.WithPrefix("quotas"), mysqlstore.WithTimeout(50*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	monthly, err := s.Register(ctx, store.Spec{Name: "api-calls", Algorithm: store.FixedWindow, Limit: 100_000,
		Calendar: store.Calendar{Months: 1}}) // from the 1st, 00:00 UTC
	fmt.Println("monthly quota:", monthly, err)
	_, err = s.Register(ctx, store.Spec{Name: "burst", Algorithm: store.SlidingWindow, Limit: 5, Window: time.Minute})
	fmt.Println(err != nil)

	var req store.Request
	req.Add(monthly, "tenant:acme", 1)
	var res store.Result
	err = s.Decide(ctx, &req, &res)
	fmt.Println("unavailable:", errors.Is(err, store.ErrUnavailable))
	// Output:
	// monthly quota: 1 <nil>
	// true
	// unavailable: true
}
