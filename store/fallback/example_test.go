package fallback_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
	"github.com/sluicehq/sluice/store/storetest"
)

// threeInstances is a Membership of a remote that counts three live
// instances. A real one beats into the remote (redisstore.NewFallback and
// pgstore.NewFallback bring theirs).
type threeInstances struct{}

func (threeInstances) Beat(context.Context, time.Duration) (int64, error) { return 3, nil }
func (threeInstances) Leave(context.Context) error                        { return nil }

// A Store decides on the remote while it answers; when the remote fails,
// each instance enforces its share of every limit locally.
func Example() {
	ctx := context.Background()
	remote := storetest.NewFaulty(store.NewMemory()) // stands for a network store
	f, err := fallback.New(remote, threeInstances{}, fallback.WithTripAfter(1),
		fallback.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		panic(err)
	}
	defer f.Close()
	id, err := f.Register(ctx, store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: 300, Window: 24 * time.Hour})
	if err != nil {
		panic(err)
	}
	remote.SetErr(store.Unavailable(fmt.Errorf("connection refused")))
	admitted := 0
	for range 200 {
		req := store.Request{Now: int64(time.Hour)}
		req.Add(id, "tenant-a", 1)
		var res store.Result
		if err := f.Decide(ctx, &req, &res); err != nil {
			panic(err)
		}
		if res.Allowed {
			admitted++
		}
	}
	h := f.Health()
	fmt.Println("degraded:", h.Degraded, "instances:", h.Instances, "admitted locally:", admitted)
	// Output: degraded: true instances: 3 admitted locally: 100
}
