package penalty

import (
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

func mustBox(t testing.TB, capacity int, opts ...Option) *Box {
	t.Helper()
	b, err := NewBox(capacity, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	sec    = int64(time.Second)
	minute = int64(time.Minute)
	hr     = int64(time.Hour)
)

func TestBoxDefaultsEscalate(t *testing.T) {
	b := mustBox(t, 16)
	now := int64(1)
	strike3 := func() Status {
		t.Helper()
		var st Status
		for i := range 3 {
			st = b.Strike("k", now)
			if i < 2 && (st.Started || st.Strikes != i+1) {
				t.Fatalf("strike %d: %+v", i+1, st)
			}
			now += 10 * minute
		}
		return st
	}
	for i, want := range []time.Duration{5 * time.Minute, 15 * time.Minute, time.Hour, time.Hour} {
		start := now + 20*minute // the third strike's time
		st := strike3()
		if !st.Started || st.RetryAfter != want || st.Level != i+1 {
			t.Fatalf("timeout %d: %+v, want %v", i+1, st, want)
		}
		if d, blocked := b.Check("k", start+1); !blocked || d != want-1 {
			t.Fatalf("Check during timeout %d: %v %v", i+1, d, blocked)
		}
		if d, blocked := b.Check("k", start+int64(want)); blocked || d != 0 {
			t.Fatalf("Check at the end of timeout %d: %v %v", i+1, d, blocked)
		}
		// Strikes while serving the timeout neither extend nor shorten it.
		if st := b.Strike("k", start+1); st.Started || st.RetryAfter != want-1 {
			t.Fatalf("strike during timeout: %+v", st)
		}
		now = start + int64(want)
	}
	if s := b.Stats(); s.Timeouts != 4 || s.Ignored != 4 || s.Strikes != 12 {
		t.Fatalf("stats %+v", s)
	}
}

func TestBoxStrikesExpireAfterWindow(t *testing.T) {
	b := mustBox(t, 16)
	// Three strikes spread over more than an hour never start a timeout.
	for i := range 10 {
		if st := b.Strike("k", 1+int64(i)*31*minute); st.Started || st.Strikes > 2 {
			t.Fatalf("strike %d: %+v", i, st)
		}
	}
	// The first strike counts for exactly the window.
	b2 := mustBox(t, 16)
	b2.Strike("a", 1)
	b2.Strike("a", 2)
	if st := b2.Strike("a", 1+hr-1); !st.Started {
		t.Fatalf("third strike inside the window: %+v", st)
	}
	b2.Strike("b", 1)
	b2.Strike("b", 2)
	if st := b2.Strike("b", 1+hr); st.Started || st.Strikes != 2 {
		t.Fatalf("third strike as the first expires: %+v", st)
	}
}

func TestBoxLevelDecays(t *testing.T) {
	b := mustBox(t, 16, WithStrikes(1, time.Minute), WithLevelDecay(time.Hour))
	now := int64(1)
	st := b.Strike("k", now) // level 1: 5 min
	now += int64(st.RetryAfter)
	st = b.Strike("k", now) // level 2: 15 min
	if st.Level != 2 || st.RetryAfter != 15*time.Minute {
		t.Fatalf("%+v", st)
	}
	now += int64(st.RetryAfter) + hr // one level forgiven
	if st = b.Strike("k", now); st.Level != 2 || st.RetryAfter != 15*time.Minute {
		t.Fatalf("after one decay: %+v", st)
	}
	now += int64(st.RetryAfter) + 2*hr // both levels forgiven
	if st = b.Strike("k", now); st.Level != 1 || st.RetryAfter != 5*time.Minute {
		t.Fatalf("after full decay: %+v", st)
	}
}

func TestBoxPardonAndCheckNeverInserts(t *testing.T) {
	b := mustBox(t, 16, WithStrikes(1, time.Minute))
	if _, blocked := b.Check("nobody", 1); blocked || b.Stats().Entries != 0 {
		t.Fatal("Check inserted or blocked an unknown key")
	}
	if b.Pardon("nobody") {
		t.Fatal("pardoned an unknown key")
	}
	b.Strike("k", 1)
	if _, blocked := b.Check("k", 2); !blocked {
		t.Fatal("not blocked")
	}
	if !b.Pardon("k") {
		t.Fatal("pardon")
	}
	if _, blocked := b.Check("k", 2); blocked {
		t.Fatal("blocked after pardon")
	}
	if st := b.Strike("k", 3); st.Level != 1 || st.RetryAfter != 5*time.Minute {
		t.Fatalf("pardon did not clear the level: %+v", st)
	}
}

func TestBoxCheckAllocatesNothing(t *testing.T) {
	b := mustBox(t, 16, WithStrikes(1, time.Minute))
	b.Strike("k", 1)
	n := testing.AllocsPerRun(1000, func() {
		b.Check("k", 2)
		b.Check("other", 2)
		b.Strike("k", 3)
	})
	if n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestBoxOptionErrors(t *testing.T) {
	bad := []Option{
		WithStrikes(0, time.Hour), WithStrikes(MaxStrikes+1, time.Hour), WithStrikes(3, 0),
		WithTimeouts(), WithTimeouts(0), WithTimeouts(time.Hour, time.Minute), WithLevelDecay(-1),
	}
	for i, o := range bad {
		if _, err := NewBox(8, o); err == nil || !strings.HasPrefix(err.Error(), "penalty: ") {
			t.Errorf("option %d: %v", i, err)
		}
	}
	if _, err := NewBox(0); err == nil {
		t.Error("zero capacity accepted")
	}
	if _, err := NewBox(8, WithTimeouts(time.Second, time.Second)); err != nil {
		t.Error(err)
	}
}

func TestBoxConcurrentStrikesStartOneTimeout(t *testing.T) {
	b := mustBox(t, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	started := 0
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if b.Strike("k", 1).Started {
					mu.Lock()
					started++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if started != 1 || b.Stats().Timeouts != 1 || b.Stats().Strikes != 3 || b.Stats().Ignored != 797 {
		t.Fatalf("started %d, stats %+v", started, b.Stats())
	}
}

func TestBoxFullTableKeepsOffenders(t *testing.T) {
	b := mustBox(t, 64, WithStrikes(1, time.Minute))
	b.Strike("offender", 1)
	untracked := 0
	for i := range 10_000 {
		if !b.Strike(keyOf(i), 2).Tracked {
			untracked++
		}
	}
	if untracked == 0 || b.Stats().Entries > 64 {
		t.Fatalf("untracked %d, stats %+v", untracked, b.Stats())
	}
	if d, blocked := b.Check("offender", 3); !blocked || d != 5*time.Minute-2 {
		t.Fatalf("offender forgotten under a flood: %v %v", d, blocked)
	}
}

func keyOf(i int) string {
	var buf [20]byte
	n := len(buf)
	for {
		n--
		buf[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			break
		}
	}
	return "client-" + string(buf[n:])
}

// TestEntrySize keeps NewBox's memory statement true: per key of
// capacity, 1.25 table slots (16 bytes of key, pin count and padding, and
// an entry) and as many histories beside the table.
func TestEntrySize(t *testing.T) {
	if per := (16 + unsafe.Sizeof(entry{}) + unsafe.Sizeof(history{})) * 5 / 4; per > 250 {
		t.Fatalf("%d bytes per key of capacity, documented 250", per)
	}
}

// TestBoxCheckFallsBackWhileUnpublished: while an entry's version is odd
// (reset by the table or Pardon and not yet marked by a holder), Check
// does not trust the unpinned read and asks again pinned.
func TestBoxCheckFallsBackWhileUnpublished(t *testing.T) {
	b := mustBox(t, 16, WithStrikes(1, time.Minute))
	b.Strike("k", 1)
	ref, ok := b.table.Lookup("k")
	if !ok {
		t.Fatal("no entry")
	}
	e := ref.Value()
	e.version.Add(1) // odd, as between an insertion and its Strike's mark
	if d, blocked := b.Check("k", 2); !blocked || d != 5*time.Minute-1 {
		t.Fatalf("Check on an unpublished entry: %v %v", d, blocked)
	}
	e.version.Add(1)
	ref.Release()
	if d, blocked := b.Check("k", 2); !blocked || d != 5*time.Minute-1 {
		t.Fatalf("Check: %v %v", d, blocked)
	}
}

// TestBoxCheckNeverReportsAnotherKey: an offender and an innocent key
// share a table of one entry. The offender earns a short timeout, recovers
// and is evicted by the innocent, which is struck once and pardoned at
// once (so it is never blocked), then evicted by the offender in turn: the
// entry changes keys all the time. Checks of the innocent key, racing all
// that, must never report a timeout: it would be the offender's.
func TestBoxCheckNeverReportsAnotherKey(t *testing.T) {
	b := mustBox(t, 1, WithStrikes(2, 6), WithTimeouts(5), WithLevelDecay(8))
	// Rounds run until the entry has changed keys often enough (the
	// writers interleave far less on a loaded machine), bounded in count.
	target, maxIters := uint64(50_000), 1_000_000
	if testing.Short() || boxRaceEnabled {
		target, maxIters = 1_000, 200_000
	}
	enough := func(i int) bool { return i%256 == 0 && b.Stats().Evictions >= target }
	const offender, innocent = "offender", "innocent"
	var clock atomic.Int64
	var writing sync.WaitGroup
	writing.Go(func() {
		for i := 0; i < maxIters && !enough(i); i++ {
			// Two strikes: a timeout. Then time enough to recover, and a
			// chance for the innocent key to take the entry.
			b.Strike(offender, clock.Add(1))
			b.Strike(offender, clock.Add(1))
			clock.Add(20)
			runtime.Gosched()
		}
	})
	writing.Go(func() {
		for i := 0; i < maxIters && !enough(i); i++ {
			// One strike, below the threshold of 2, forgiven before the
			// next: never a timeout.
			b.Strike(innocent, clock.Add(1))
			b.Pardon(innocent)
			runtime.Gosched()
		}
	})
	var done atomic.Bool
	checked := make(chan int)
	go func() {
		n := 0
		for ; !done.Load(); n++ {
			// At time 0 every timeout ever given lies ahead: the
			// offender's until would read as blocked.
			if d, blocked := b.Check(innocent, 0); blocked {
				t.Errorf("%s reported blocked for %v", innocent, d)
				break
			}
			if n%64 == 0 {
				runtime.Gosched() // let both writers run, even on one core
			}
		}
		checked <- n
	}()
	writing.Wait()
	done.Store(true)
	n := <-checked
	s := b.Stats()
	t.Logf("%d checks, stats %+v", n, s)
	// About one eviction per round on an idle machine; far fewer when the
	// writers rarely interleave (a loaded 2-core machine), so the rounds
	// went on until the entry had changed keys target times.
	if s.Timeouts == 0 || s.Evictions < target {
		t.Fatalf("the test did not exercise the race: %+v", s)
	}
}

// TestBoxCapacityAboveMaximumIsAnError: NewBox refuses a capacity above
// MaxCapacity with an error, before allocating (math.MaxInt panicked and
// 1<<40 was a fatal out-of-memory).
func TestBoxCapacityAboveMaximumIsAnError(t *testing.T) {
	for _, c := range []int{MaxCapacity + 1, min(1<<40, math.MaxInt), math.MaxInt} {
		if b, err := NewBox(c); err == nil || b != nil || !strings.HasPrefix(err.Error(), "penalty: ") {
			t.Errorf("NewBox(%d): %v, want a penalty: error", c, err)
		}
	}
}
