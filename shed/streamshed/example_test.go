package streamshed_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/streamshed"
)

// A connection of a user who may hold one open, sending 3 messages at once
// at most: the fourth closes it with 1008, and the user may connect again.
func Example() {
	c, err := shed.New([]shed.Rule{{Name: "open-user", Category: streamshed.DefaultCategory,
		Identity: shed.User, Algorithm: shed.Concurrency, Limit: 1, LeaseTTL: time.Hour}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	g, err := streamshed.NewGuard(c,
		streamshed.WithMessageLimit(3, ratelimit.Per(1, time.Second)),
		streamshed.WithClock(func() int64 { return 1 }), // time stands still
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	conn, _, _ := g.Open(ctx, shed.Attempt{User: "alice"})
	defer conn.Done()
	conn.Bind(func(code int, reason string) error {
		fmt.Println("close:", code, reason)
		return nil
	})
	_, d, _ := g.Open(ctx, shed.Attempt{User: "alice"})
	fmt.Println("second connection:", d.Kind)
	for i := range 4 {
		fmt.Println("message", i, conn.Message())
	}
	again, d, _ := g.Open(ctx, shed.Attempt{User: "alice"})
	defer again.Done()
	fmt.Println("after the close:", d.Kind)
	// Output:
	// second connection: over_limit
	// message 0 <nil>
	// message 1 <nil>
	// message 2 <nil>
	// close: 1008 message rate exceeded: 3 at once, 1/1s
	// message 3 streamshed: message rate exceeded
	// after the close: admitted
}
