package pgstore_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// BenchmarkDecide decides one daily fixed-window quota per request over
// 1000 keys, with 8 concurrent callers, on Memory and on PostgreSQL, and
// reports each decision's latency at p50 and p99 besides the throughput
// (ns/op).
func BenchmarkDecide(b *testing.B) {
	spec := store.Spec{Name: "daily", Algorithm: store.FixedWindow, Limit: 1 << 40, Window: 24 * time.Hour}
	for _, tc := range []struct {
		name string
		make func(b *testing.B) store.Store
	}{
		{"memory", func(*testing.B) store.Store { return store.NewMemory() }},
		{"pgstore", func(b *testing.B) store.Store { return newStore(b, sharedPool(b)) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := tc.make(b)
			id := storetest.MustRegister(b, s, spec)
			keys := make([]string, 1000)
			for i := range keys {
				keys[i] = fmt.Sprint("tenant:", i)
			}
			var (
				mu   sync.Mutex
				lats []time.Duration
			)
			b.SetParallelism(max(1, 8/max(1, testingProcs())))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				var req store.Request
				var res store.Result
				i := 0
				for pb.Next() {
					req = store.Request{Now: time.Now().UnixNano()}
					req.Add(id, keys[i%len(keys)], 1)
					i += 7
					start := time.Now()
					if err := s.Decide(context.Background(), &req, &res); err != nil || !res.Allowed {
						b.Errorf("Decide: %v, allowed %v", err, res.Allowed)
						return
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				lats = append(lats, mine...)
				mu.Unlock()
			})
			b.StopTimer()
			if len(lats) == 0 {
				return
			}
			slices.Sort(lats)
			b.ReportMetric(float64(lats[len(lats)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lats[len(lats)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

// testingProcs is GOMAXPROCS, the callers RunParallel starts per unit of
// parallelism.
func testingProcs() int { return runtime.GOMAXPROCS(0) }
