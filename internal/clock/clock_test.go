package clock

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestNowIsPositiveAndMonotonic(t *testing.T) {
	a := Now()
	b := Now()
	if a <= 0 || b < a {
		t.Fatalf("Now went wrong: a=%d b=%d", a, b)
	}
}

func TestNowFollowsSynctestClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := Now()
		time.Sleep(3 * time.Second)
		b := Now()
		if a <= 0 {
			t.Fatalf("Now in a bubble is not positive: %d", a)
		}
		if got := time.Duration(b - a); got != 3*time.Second {
			t.Fatalf("fake sleep of 3s advanced Now by %v", got)
		}
	})
}
