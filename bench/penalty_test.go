package bench

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/penalty"
)

// BenchmarkPenaltyCheck: "is this key serving a timeout?" over 10^3 and
// 10^6 keys all in a timeout, serial and parallel, for sluice's Box and a
// map behind a sync.RWMutex (the usual hand-rolled penalty list), asked in
// the order of inRequestOrder.
func BenchmarkPenaltyCheck(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "rl:login:ip:198.51." + strconv.Itoa(i) + "/32"
		}
		box, err := penalty.NewBox(n*3/2, penalty.WithStrikes(1, time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		var mu sync.RWMutex
		until := make(map[string]int64, n)
		const now = int64(time.Hour)
		for _, k := range keys {
			if st := box.Strike(k, now); !st.Started {
				b.Fatalf("key %s not in a timeout: %+v", k, st)
			}
			until[k] = now + int64(5*time.Minute)
		}
		walk := inRequestOrder(keys, 1)
		impls := []struct {
			name  string
			check func(string) bool
		}{
			{"sluice", func(k string) bool { _, blocked := box.Check(k, now+1); return blocked }},
			{"rwmutex-map", func(k string) bool {
				mu.RLock()
				u := until[k]
				mu.RUnlock()
				return now+1 < u
			}},
		}
		for _, impl := range impls {
			b.Run(impl.name+"/keys="+strconv.Itoa(n)+"/serial", func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if !impl.check(walk[i]) {
						b.Fatal("not blocked")
					}
					if i++; i == n {
						i = 0
					}
				}
			})
			b.Run(impl.name+"/keys="+strconv.Itoa(n)+"/parallel", func(b *testing.B) {
				b.ReportAllocs()
				inParallel(b, 1, func(_, count int) {
					i := 0
					for range count {
						if !impl.check(walk[i]) {
							b.Error("not blocked")
							return
						}
						if i++; i == n {
							i = 0
						}
					}
				})
			})
		}
	}
}
