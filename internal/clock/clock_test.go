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

// TestNowIsUnixTime: Now counts from the Unix epoch, so windows aligned at
// multiples of their length start on UTC boundaries.
func TestNowIsUnixTime(t *testing.T) {
	before := time.Now().UnixNano()
	now := Now()
	after := time.Now().UnixNano()
	// The wall clock may have been stepped since start-up; allow a second.
	if now < before-int64(time.Second) || now > after+int64(time.Second) {
		t.Fatalf("Now %d, wall clock between %d and %d", now, before, after)
	}
}

// TestNowInBubbleIsUnixTime: inside a synctest bubble Now is the bubble's
// Unix time (midnight UTC, 2000-01-01, at its start), so a day window
// starts on the bubble's midnights.
func TestNowInBubbleIsUnixTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if got, want := Now(), time.Now().UnixNano(); got != want {
			t.Fatalf("Now %d in a bubble, its Unix time %d", got, want)
		}
		if Now()%int64(24*time.Hour) != 0 {
			t.Fatalf("a bubble starts at midnight UTC; Now mod a day is %v", time.Duration(Now()%int64(24*time.Hour)))
		}
	})
}
