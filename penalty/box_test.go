package penalty

import (
	"strings"
	"sync"
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

// TestEntrySize keeps NewBox's memory statement true: a table slot (16
// bytes plus 4 of bucket overhead) and 1.25 entries per key of capacity.
func TestEntrySize(t *testing.T) {
	if per := 20 + unsafe.Sizeof(entry{})*5/4; per > 230 {
		t.Fatalf("%d bytes per key of capacity, documented 230", per)
	}
}
