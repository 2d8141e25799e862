package bench

import (
	"context"
	"hash/maphash"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"golang.org/x/time/rate"
)

// layers are the per-key limits every request of BenchmarkKeyed1e6Layered
// passes: one per client address, one per user, one per tenant, each over
// keyedKeys keys.
var layers = [...]string{"ip", "user", "tenant"}

// layeredKeys are the keys of each layer, in the order the warm-up inserts
// them; layeredRequests the order each layer's keys are asked in, a
// different random order per layer (inRequestOrder), so that the three
// keys of a request were not inserted together.
var (
	layeredKeys = sync.OnceValue(func() (keys [len(layers)][]string) {
		for j, l := range layers {
			keys[j] = make([]string, keyedKeys)
			for i := range keys[j] {
				keys[j][i] = l + "-" + strconv.Itoa(i)
			}
		}
		return keys
	})
	layeredRequests = sync.OnceValue(func() (walk [len(layers)][]string) {
		keys := layeredKeys()
		for j := range walk {
			walk[j] = inRequestOrder(keys[j], uint64(j+1))
		}
		return walk
	})
)

// layeredImpl is one implementation of three per-key token buckets that a
// request must all pass: new returns a maker of decision functions (one
// for each goroutine that decides) and a function that reports how many
// keys each layer holds (-1 if it cannot tell).
type layeredImpl struct {
	name string
	new  func(b *testing.B) (allower func() func(keys *[len(layers)]string) bool, held func(layer int) int, done func())
}

func layeredImpls() []layeredImpl {
	const perSecond = 100_000_000 // as keyedImpls: no key is ever limited
	return []layeredImpl{
		{"sluice-store", func(b *testing.B) (func() func(*[len(layers)]string) bool, func(int) int, func()) {
			// The three limits in one store.Memory, decided together, all
			// or nothing, in one Decide of three hits.
			m := store.NewMemory()
			ctx := context.Background()
			var ids [len(layers)]store.LimitID
			for j, l := range layers {
				id, err := m.Register(ctx, store.Spec{Name: l, Algorithm: store.TokenBucket, Limit: keyedBurst,
					Rate: ratelimit.Per(perSecond, time.Second), Capacity: 2 * keyedKeys})
				if err != nil {
					b.Fatal(err)
				}
				ids[j] = id
			}
			return func() func(*[len(layers)]string) bool {
				req, res := new(store.Request), new(store.Result)
				return func(keys *[len(layers)]string) bool {
					req.Reset(clock.Now())
					for j, k := range keys {
						req.Add(ids[j], k, 1)
					}
					return m.Decide(ctx, req, res) == nil && res.Allowed
				}
			}, func(j int) int { return int(m.TableStats(ids[j]).Entries) }, func() {}
		}},
		{"golimiter", func(b *testing.B) (func() func(*[len(layers)]string) bool, func(int) int, func()) {
			// One memorystore a layer, taken in turn.
			var ss [len(layers)]interface {
				Take(context.Context, string) (uint64, uint64, uint64, bool, error)
				Close(context.Context) error
			}
			for j := range ss {
				s, err := memorystore.New(&memorystore.Config{Tokens: perSecond, Interval: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				ss[j] = s
			}
			ctx := context.Background()
			return func() func(*[len(layers)]string) bool {
					return func(keys *[len(layers)]string) bool {
						for j, k := range keys {
							if _, _, _, ok, err := ss[j].Take(ctx, k); !ok || err != nil {
								return false
							}
						}
						return true
					}
				}, func(int) int { return -1 }, func() {
					for _, s := range ss {
						_ = s.Close(ctx)
					}
				}
		}},
		{"xtimeratemap", func(b *testing.B) (func() func(*[len(layers)]string) bool, func(int) int, func()) {
			// One map of x/time/rate Limiters a layer, sharded as in
			// keyedImpls, asked in turn.
			var ms [len(layers)]*shardedLimiters
			for j := range ms {
				ms[j] = newShardedLimiters(perSecond, keyedBurst)
			}
			return func() func(*[len(layers)]string) bool {
				return func(keys *[len(layers)]string) bool {
					for j, k := range keys {
						if !ms[j].allow(k) {
							return false
						}
					}
					return true
				}
			}, func(j int) int { return ms[j].len() }, func() {}
		}},
	}
}

// shardedLimiters is a map of x/time/rate Limiters sharded 64 ways by a
// seeded hash of the key, each shard under its own mutex: what a user of
// x/time/rate would write for many keys and cores.
type shardedLimiters struct {
	seed   maphash.Seed
	limit  rate.Limit
	burst  int
	shards [64]struct {
		mu sync.Mutex
		m  map[string]*rate.Limiter
		_  [48]byte // a shard a cache line of its own
	}
}

func newShardedLimiters(limit rate.Limit, burst int) *shardedLimiters {
	s := &shardedLimiters{seed: maphash.MakeSeed(), limit: limit, burst: burst}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*rate.Limiter)
	}
	return s
}

// allow is the key's Limiter's Allow, the Limiter made on first use.
func (s *shardedLimiters) allow(key string) bool {
	sh := &s.shards[maphash.String(s.seed, key)%uint64(len(s.shards))]
	sh.mu.Lock()
	l, ok := sh.m[key]
	if !ok {
		l = rate.NewLimiter(s.limit, s.burst)
		sh.m[key] = l
	}
	sh.mu.Unlock()
	return l.Allow()
}

// len returns how many keys s holds.
func (s *shardedLimiters) len() int {
	n := 0
	for i := range s.shards {
		s.shards[i].mu.Lock()
		n += len(s.shards[i].m)
		s.shards[i].mu.Unlock()
	}
	return n
}

// BenchmarkKeyed1e6Layered: a request that must pass three per-key token
// buckets (per address, per user, per tenant), each over one million keys
// inserted before the timer starts, its three keys asked in
// layeredRequests' orders. The per-key cost of a layered rule set, where
// the misses of the three lookups may overlap (store.Memory prefetches
// every hit's entry before deciding the first) or follow one another.
func BenchmarkKeyed1e6Layered(b *testing.B) {
	keys, walk := layeredKeys(), layeredRequests()
	for _, impl := range layeredImpls() {
		serialAndParallel(b, impl.name, func(b *testing.B, parallel bool) {
			heap0 := heapInUse()
			allower, held, done := impl.new(b)
			defer done()
			allow := allower()
			ks := new([len(layers)]string)
			for i := range keyedKeys {
				*ks = [len(layers)]string{keys[0][i], keys[1][i], keys[2][i]}
				if !allow(ks) {
					b.Fatal("warm-up decision rejected")
				}
			}
			perKey := float64(heapInUse()-heap0) / float64(len(layers)*keyedKeys)
			check := func(when string) {
				for j := range layers {
					if n := held(j); n != -1 && n != keyedKeys {
						b.Fatalf("layer %s holds %d keys %s, want %d", layers[j], n, when, keyedKeys)
					}
				}
			}
			check("after warm-up")
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			run := func(allow func(*[len(layers)]string) bool, i, n int) bool {
				ks := new([len(layers)]string)
				for range n {
					*ks = [len(layers)]string{walk[0][i], walk[1][i], walk[2][i]}
					if !allow(ks) {
						return false
					}
					if i++; i == keyedKeys {
						i = 0
					}
				}
				return true
			}
			if !parallel {
				if !run(allow, 0, b.N) {
					b.Fatal("rejected below the limit")
				}
			} else {
				inParallel(b, 1, func(w, n int) {
					if !run(allower(), (w+1)*(keyedKeys/7)%keyedKeys, n) {
						b.Error("rejected below the limit")
					}
				})
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			check("after the run")
			b.ReportMetric(perKey, "heap-B/key")
		})
	}
}
