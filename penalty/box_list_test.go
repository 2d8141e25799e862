package penalty

import (
	"strconv"
	"testing"
	"time"
)

// TestPenalizedListsTimeoutsLongestFirst: Penalized reports exactly the
// keys serving a timeout at now, the longest time left first, at most n,
// with their level; PardonHash of a reported hash ends that key's timeout
// only.
func TestPenalizedListsTimeoutsLongestFirst(t *testing.T) {
	b := mustBox(t, 64, WithStrikes(1, time.Hour), WithTimeouts(time.Minute, 10*time.Minute))
	now := int64(time.Hour)
	// k0..k4 start a timeout a second apart; k1 twice (level 2, 10
	// minutes); "struck" only gets a strike that does not start one.
	for i := range 5 {
		b.Strike("k"+strconv.Itoa(i), now+int64(i)*sec)
	}
	b.Strike("k1", now+2*minute) // its first timeout is over: the second
	nb := mustBox(t, 8, WithStrikes(2, time.Hour))
	nb.Strike("struck", now)
	if got, _ := nb.Penalized(10, now); len(got) != 0 {
		t.Errorf("a box without a timeout listed %+v", got)
	}
	at := now + 30*sec
	got, err := b.Penalized(3, at)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d keys, want 3: %+v", len(got), got)
	}
	if got[0].Left != time.Duration(now+2*minute+10*minute-at) || got[0].Level != 2 {
		t.Errorf("first: %+v, want k1 at level 2 with its 10 minutes", got[0])
	}
	// Then k4 and k3: the latest of the one-minute timeouts.
	if got[1].Left != time.Duration(now+4*sec+minute-at) || got[2].Left != time.Duration(now+3*sec+minute-at) || got[1].Level != 1 {
		t.Errorf("then: %+v, %+v, want k4 then k3 at level 1", got[1], got[2])
	}
	all, _ := b.Penalized(MaxListed, at)
	if len(all) != 5 {
		t.Fatalf("%d keys in a timeout, want 5: %+v", len(all), all)
	}
	if !b.PardonHash(got[0].Hash) {
		t.Fatal("PardonHash of a listed hash found nothing")
	}
	if _, in := b.Check("k1", at); in {
		t.Error("k1 is still in a timeout after PardonHash")
	}
	if _, in := b.Check("k4", at); !in {
		t.Error("pardoning k1 ended k4's timeout")
	}
	if b.PardonHash(12345) {
		t.Error("PardonHash of a hash no key has reported a pardon")
	}
	if after, _ := b.Penalized(MaxListed, now+time.Hour.Nanoseconds()); len(after) != 0 {
		t.Errorf("an hour later %d keys are still listed", len(after))
	}
	for _, n := range []int{0, MaxListed + 1} {
		if _, err := b.Penalized(n, at); err == nil {
			t.Errorf("Penalized(%d) took a count outside [1, %d]", n, MaxListed)
		}
	}
}
