package ratelimit

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestNewShardedBucketRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		rate  Rate
		burst int64
		opts  []ShardedOption
	}{
		{Per(0, time.Second), 10, nil},
		{Per(10, time.Second), 0, nil},
		{Per(10, time.Second), -1, nil},
		{Per(10, time.Second), 10, []ShardedOption{WithShardCount(3)}},
		{Per(10, time.Second), 10, []ShardedOption{nil}},
		{Per(1, 1<<58), 2, []ShardedOption{WithShardCount(2)}}, // a shard's burst refills in 2^59 ns and more
	} {
		if _, err := NewShardedBucket(c.rate, c.burst, c.opts...); err == nil {
			t.Errorf("NewShardedBucket(%v, %d, %d opts): no error", c.rate, c.burst, len(c.opts))
		}
	}
	b, err := NewShardedBucket(Per(10, time.Second), 3, WithShardCount(16))
	if err != nil || b.Shards() != 2 || b.Burst() != 3 || b.Interval() != 100*time.Millisecond {
		t.Fatalf("burst 3 over 16 shards: %v shards, burst %d, interval %v, %v (want 2 shards: one token each at least)", b.Shards(), b.Burst(), b.Interval(), err)
	}
	// The default count: at least 64 tokens a shard.
	for burst, most := range map[int64]int{1: 1, 127: 1, 128: 2, 1 << 20: 1 << 16} {
		b, err := NewShardedBucket(Per(10, time.Second), burst)
		if err != nil || b.Shards() > most || burst/int64(b.Shards()) < min(burst, minShardTokens) {
			t.Errorf("burst %d: %d shards, %v (want at most %d, %d tokens each at least)", burst, b.Shards(), err, most, minShardTokens)
		}
	}
}

// TestShardedBucketBasics: a full bucket admits its burst exactly, whatever
// shard the caller lands on and however it is split (weighted requests
// gather); a refund is admitted again; then it refills at the rate.
func TestShardedBucketBasics(t *testing.T) {
	for _, shards := range []int{1, 2, 4, 8} {
		b, err := NewShardedBucket(Per(1, time.Second), 10, WithShardCount(shards))
		if err != nil {
			t.Fatal(err)
		}
		now := int64(time.Hour)
		for _, n := range []int64{3, 1, 5, 1} {
			if d := b.AllowN(now, n); !d.Allowed() || d.Limit != 10 {
				t.Fatalf("%d shards: AllowN(%d) of a bucket with room: %+v", shards, n, d)
			}
		}
		d := b.AllowN(now, 1)
		if d.Allowed() || d.RetryAfter <= 0 || d.RetryAfter == Never {
			t.Fatalf("%d shards: the 11th token: %+v", shards, d)
		}
		if d := b.AllowN(now, 11); d.Reason() != ReasonExceedsCapacity {
			t.Fatalf("%d shards: more than the burst: %+v", shards, d)
		}
		b.Refund(now, 4)
		if d := b.AllowN(now, 4); !d.Allowed() {
			t.Fatalf("%d shards: the 4 refunded tokens: %+v", shards, d)
		}
		if b.AllowN(now, 1).Allowed() {
			t.Fatalf("%d shards: admitted beyond the refund", shards)
		}
		// Every shard refills in its burst times its interval (k times the
		// bucket's): a shard of burst/k+1 tokens takes longer than
		// burst·interval. Once all are full, exactly the burst again.
		now += int64(b.full(now))
		if d := b.AllowN(now, 10); !d.Allowed() {
			t.Fatalf("%d shards: a refilled bucket: %+v", shards, d)
		}
		if b.AllowN(now, 1).Allowed() {
			t.Fatalf("%d shards: more than the burst after a refill", shards)
		}
		b.Refund(now, 100) // more than the burst: the excess is dropped
		if !b.AllowN(now, 10).Allowed() || b.AllowN(now, 1).Allowed() {
			t.Fatalf("%d shards: a refund beyond the burst filled more than the burst", shards)
		}
	}
}

// TestShardedBucketRetryAfterIsNeverEarly: from one goroutine, a rejected
// request retried after RetryAfter is admitted.
func TestShardedBucketRetryAfterIsNeverEarly(t *testing.T) {
	for _, n := range []int64{1, 3, 7} {
		b, err := NewShardedBucket(Per(10, time.Second), 8, WithShardCount(4))
		if err != nil {
			t.Fatal(err)
		}
		now := int64(time.Hour)
		for b.AllowN(now, 1).Allowed() {
		}
		d := b.AllowN(now, n)
		if d.Allowed() {
			t.Fatalf("n=%d admitted from an empty bucket", n)
		}
		if d := b.AllowN(now+int64(d.RetryAfter), n); !d.Allowed() {
			t.Fatalf("n=%d after its RetryAfter: %+v", n, d)
		}
	}
}

// TestShardedBucketNeverOverAdmits: goroutines on a shared virtual clock
// take and sometimes give back tokens; in every interval of each length
// checked, the tokens admitted net of refunds never exceed burst + the
// tokens the rate refills in it, as for one exact bucket.
func TestShardedBucketNeverOverAdmits(t *testing.T) {
	const burst, interval, workers, calls = 50, int64(1000), 8, 4000
	for _, shards := range []int{1, 4, 16} {
		b, err := NewShardedBucket(Per(1, time.Duration(interval)), burst, WithShardCount(shards))
		if err != nil {
			t.Fatal(err)
		}
		var clock atomic.Int64
		clock.Store(int64(time.Hour))
		var mu sync.Mutex
		var events []int64 // the times of admitted tokens, one entry a token
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				n := int64(w%3 + 1)
				var mine []int64
				for i := range calls {
					now := clock.Add(100) // ten calls per token refilled
					if !b.AllowN(now, n).Allowed() {
						continue
					}
					if i%4 == 0 { // given back at once: not counted
						b.Refund(now, n)
						continue
					}
					for range n {
						mine = append(mine, now)
					}
				}
				mu.Lock()
				events = append(events, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(events)
		for _, length := range []int64{0, interval, 10 * interval, 100 * interval, 1000 * interval} {
			bound := burst + length/interval
			j := 0
			for i := range events {
				for j < len(events) && events[j] <= events[i]+length {
					j++
				}
				if c := int64(j - i); c > bound {
					t.Fatalf("%d shards: %d tokens in [%d, %d], bound %d", shards, c, events[i], events[i]+length, bound)
				}
			}
		}
		if len(events) < burst {
			t.Fatalf("%d shards: only %d tokens admitted", shards, len(events))
		}
	}
}

// TestShardedBucketGathersFromEveryShard: a request larger than any shard
// holds is admitted from all of them, however many there are; one that
// does not fit takes nothing.
func TestShardedBucketGathersFromEveryShard(t *testing.T) {
	b, err := NewShardedBucket(Per(1, time.Second), 1024, WithShardCount(256))
	if err != nil || b.Shards() != 256 {
		t.Fatalf("%v, %d shards", err, b.Shards())
	}
	now := int64(time.Hour)
	if !b.AllowN(now, 1000).Allowed() || b.Available(now) != 24 {
		t.Fatalf("1000 of 1024 over 256 shards: %d left", b.Available(now))
	}
	if b.AllowN(now, 25).Allowed() || b.Available(now) != 24 {
		t.Fatalf("25 of 24: admitted, or %d left (want 24: a failed gather gives back)", b.Available(now))
	}
}

func TestShardedBucketAvailableAndTake(t *testing.T) {
	b, err := NewShardedBucket(Per(1, time.Second), 10, WithShardCount(4))
	if err != nil {
		t.Fatal(err)
	}
	now := int64(time.Hour)
	if a := b.Available(now); a != 10 {
		t.Fatalf("a full bucket: %d available, want 10", a)
	}
	if got := b.Take(now, 7); got != 7 || b.Available(now) != 3 {
		t.Fatalf("Take(7) took %d, %d left; want 7 and 3", got, b.Available(now))
	}
	if got := b.Take(now, 5); got != 3 || b.Available(now) != 0 || b.AllowN(now, 1).Allowed() {
		t.Fatalf("Take(5) of 3 took %d", got)
	}
}

func TestShardedBucketDoesNotAllocate(t *testing.T) {
	b, _ := NewShardedBucket(Per(1, time.Nanosecond), 1<<20)
	now := int64(time.Hour)
	if a := testing.AllocsPerRun(1000, func() {
		now++
		b.AllowN(now, 1)
		b.Refund(now, 1)
		b.AllowN(now, 1<<19)
	}); a != 0 {
		t.Fatalf("AllowN and Refund allocate %v per run", a)
	}
}

// TestShardedBucketAdmitsOnlyWhatTheReferenceAdmits: under any sequence of
// requests of any weight from any shard, refunds of what was just taken
// (a later limit of an all-or-nothing decision rejected), and clock moves
// forwards and standing still, an unsharded GCRA of the same rate and
// burst, fed the same admissions and refunds, admits every admission of
// the sharded bucket, and the shards never hold more tokens than it does:
// sharding never admits more, and a refund gives back no more than was
// taken. With the clock also going backwards (where the reference itself
// is stricter than its promise), the admissions stay within burst + rate·T
// in every span T; weighted requests that gather from several shards and
// fail give each shard back what they took from it. Refunds are left out
// there: see Refund.
func TestShardedBucketAdmitsOnlyWhatTheReferenceAdmits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		shards := 1 << rapid.IntRange(0, 4).Draw(t, "log2 shards")
		burst := rapid.Int64Range(int64(shards), 40).Draw(t, "burst")
		interval := rapid.Int64Range(1, 1000).Draw(t, "interval")
		backwards := rapid.Bool().Draw(t, "backwards")
		rate := Per(1, time.Duration(interval))
		b, err := NewShardedBucket(rate, burst, WithShardCount(shards))
		if err != nil {
			t.Fatal(err)
		}
		ref, err := NewGCRA(rate, burst)
		if err != nil {
			t.Fatal(err)
		}
		var rs GCRAState
		bound := rateImpl{name: "sharded_bucket", bound: func(burst, interval, a, b int64) (int64, bool) {
			return burst + (b-a)/interval, true
		}}
		var log []rateAdmission
		now := rapid.SampledFrom([]int64{0, 1, 1 << 40}).Draw(t, "start")
		home := func(t *rapid.T) uint64 { return uint64(rapid.IntRange(0, b.Shards()-1).Draw(t, "home")) }
		actions := map[string]func(*rapid.T){
			"allow": func(t *rapid.T) {
				n := rapid.Int64Range(1, burst).Draw(t, "n")
				d, _ := b.allowFrom(home(t), now, n)
				if !d.Allowed() {
					if d.RetryAfter <= 0 {
						t.Fatalf("AllowN(%d, %d) rejected with RetryAfter %v", now, n, d.RetryAfter)
					}
					return
				}
				if rd := ref.AllowN(&rs, now, n); !rd.Allowed() && !backwards {
					t.Fatalf("AllowN(%d, %d): the sharded bucket admitted, the reference rejects: %+v", now, n, rd)
				}
				if !backwards && rapid.Bool().Draw(t, "refund") { // a later limit rejected: give it back
					b.refundFrom(home(t), now, n)
					ref.Refund(&rs, now, n)
					return
				}
				log = append(log, rateAdmission{now, n})
			},
			"advance": func(t *rapid.T) { now += rapid.Int64Range(1, 3*burst*interval).Draw(t, "dt") },
			"still":   func(t *rapid.T) {},
			"": func(t *rapid.T) {
				if got, most := b.Available(now), ref.AllowN(&rs, now, 0).Remaining; got > most && !backwards {
					t.Fatalf("at %d the shards hold %d tokens, the reference %d", now, got, most)
				}
				if err := checkRateBound(bound, burst, interval, log); err != "" {
					t.Fatal(err)
				}
			},
		}
		if backwards {
			actions["back"] = func(t *rapid.T) { now = max(0, now-rapid.Int64Range(1, burst*interval).Draw(t, "dt")) }
		}
		t.Repeat(actions)
	})
}

// TestShardedBucketAdmissionReportsItsShard: an admission that AllowN
// takes whole from one shard (from any shard count, burst and history of
// requests and clock moves) reports that shard as the whole bucket's: the
// burst as its Limit, the shard's remaining tokens times the shard count
// (at most the burst) as its Remaining, the shard's time to full as its
// ResetAfter, as a look at the shard right after says.
func TestShardedBucketAdmissionReportsItsShard(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		shards := 1 << rapid.IntRange(0, 3).Draw(t, "log2 shards")
		burst := rapid.Int64Range(int64(shards), 40).Draw(t, "burst")
		interval := rapid.Int64Range(1, 1000).Draw(t, "interval")
		b, err := NewShardedBucket(Per(1, time.Duration(interval)), burst, WithShardCount(shards))
		if err != nil {
			t.Fatal(err)
		}
		now := rapid.SampledFrom([]int64{0, 1, 1 << 40}).Draw(t, "start")
		tats := make([]int64, len(b.shards))
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			if rapid.IntRange(0, 3).Draw(t, "op") == 0 {
				now += rapid.Int64Range(0, 2*burst*interval).Draw(t, "dt")
				continue
			}
			for j := range b.shards {
				tats[j] = b.shards[j].s.tat.Load()
			}
			n := rapid.Int64Range(1, max(1, burst/int64(shards))).Draw(t, "n")
			d := b.AllowN(now, n)
			changed := -1
			for j := range b.shards {
				if b.shards[j].s.tat.Load() != tats[j] {
					if changed >= 0 {
						changed = -2 // gathered from several
						break
					}
					changed = j
				}
			}
			if !d.Allowed() || changed < 0 {
				continue
			}
			s := b.gcra(uint64(changed)).AllowN(&b.shards[changed].s, now, 0)
			want := Decision{Limit: burst, Remaining: min(burst, s.Remaining*int64(shards)), ResetAfter: s.ResetAfter}
			if d != want {
				t.Fatalf("AllowN(%d, %d) from shard %d of %d: %+v, want %+v", now, n, changed, shards, d, want)
			}
		}
	})
}

// TestShardedBucketRefundNeverOverAdmitsOutOfOrder: admissions at now
// values that go back and forth (callers whose clock reads arrive out of
// order), some of those at the latest now given back later at that now
// (RefundTo), after admissions at earlier instants: in every span the tokens admitted net of refunds never
// exceed burst + the tokens the rate refills in it.
func TestShardedBucketRefundNeverOverAdmitsOutOfOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		shards := 1 << rapid.IntRange(1, 3).Draw(t, "log2 shards")
		burst := rapid.Int64Range(int64(shards), 3*int64(shards)).Draw(t, "burst")
		interval := rapid.Int64Range(1, 100).Draw(t, "interval")
		b, err := NewShardedBucket(Per(1, time.Duration(interval)), burst, WithShardCount(shards))
		if err != nil {
			t.Fatal(err)
		}
		bound := rateImpl{name: "sharded_bucket", bound: func(burst, interval, a, b int64) (int64, bool) {
			return burst + (b-a)/interval, true
		}}
		type held struct {
			rateAdmission
			from Origin
		}
		var log []held
		var latest int64 // the latest now admitted at
		base := rapid.SampledFrom([]int64{0, 1 << 40}).Draw(t, "start")
		home := func(t *rapid.T) uint64 { return uint64(rapid.IntRange(0, b.Shards()-1).Draw(t, "home")) }
		for range rapid.IntRange(1, 150).Draw(t, "steps") {
			if len(log) > 0 && rapid.IntRange(0, 2).Draw(t, "op") == 0 {
				// A later limit rejected an earlier admission made at the
				// latest now so far: give it back at that now, after
				// admissions at earlier instants.
				k := rapid.IntRange(0, len(log)-1).Draw(t, "which")
				h := log[k]
				if h.at < latest {
					continue
				}
				b.RefundTo(h.from, h.at, h.n)
				log = append(log[:k], log[k+1:]...)
				continue
			}
			// A few instants a shard's refill apart, so that admissions meet.
			now := base + rapid.Int64Range(0, 3).Draw(t, "step")*interval*int64(shards)
			n := rapid.Int64Range(1, burst).Draw(t, "n")
			d, from := b.allowFrom(home(t), now, n)
			if d.Allowed() {
				latest = max(latest, now)
				log = append(log, held{rateAdmission{now, n}, from})
			}
		}
		net := make([]rateAdmission, len(log))
		for i, h := range log {
			net[i] = h.rateAdmission
		}
		if err := checkRateBound(bound, burst, interval, net); err != "" {
			t.Fatal(err)
		}
	})
}

// TestShardedBucketAllowNShardTakesFromTheNamedShard: a caller that names
// its shard takes its tokens there (its Origin), the name taken modulo the
// shard count, whatever its stack.
func TestShardedBucketAllowNShardTakesFromTheNamedShard(t *testing.T) {
	b, err := NewShardedBucket(Per(1, time.Second), 40, WithShardCount(4))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []uint64{0, 1, 2, 3, 6, 1<<64 - 1} {
		d, o := b.AllowNShard(i, 1, 1)
		if want := Origin(i%4 + 1); !d.Allowed() || o != want {
			t.Fatalf("shard %d: %+v from %d, want from %d", i, d, o, want)
		}
	}
}
