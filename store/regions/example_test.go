package regions_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/regions"
)

// Two regions share a daily quota of 100 through a global store (here in
// this process). After a sync, each admits the quota less the 10% headroom
// less what the other used.
func Example() {
	ctx := context.Background()
	global := new(regions.MemoryExchange)
	spec := store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: 100, Window: 24 * time.Hour}
	var rs [2]*regions.Store
	var ids [2]store.LimitID
	for i, name := range []string{"eu", "us"} {
		r, err := regions.New(name, store.NewMemory(), global, regions.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			panic(err)
		}
		defer r.Close()
		if ids[i], err = r.Register(ctx, spec); err != nil {
			panic(err)
		}
		rs[i] = r
	}
	admit := func(i, n int) (admitted int) {
		for range n {
			req := store.Request{Now: time.Now().UnixNano()}
			req.Add(ids[i], "acme", 1)
			var res store.Result
			if err := rs[i].Decide(ctx, &req, &res); err != nil {
				panic(err)
			}
			if res.Allowed {
				admitted++
			}
		}
		return admitted
	}
	fmt.Println("eu admits", admit(0, 60))
	admit(1, 1) // us meets the key
	for _, r := range []*regions.Store{rs[0], rs[1], rs[0]} {
		if err := r.Sync(ctx); err != nil {
			panic(err)
		}
	}
	fmt.Println("us admits", admit(1, 100), "more")
	// Output:
	// eu admits 60
	// us admits 29 more
}
