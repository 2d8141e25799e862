package ratelimit

import (
	"testing"
	"time"
)

// A refund names the instant of the admission it gives back: a window
// algorithm gives it back to the window that counted it, never to a later
// one that counted others (which would then admit more than its limit).

func TestFixedWindowRefundNeverReachesALaterWindow(t *testing.T) {
	const w = int64(time.Minute)
	f, err := NewFixedWindow(2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var s FixedWindowState
	at := 10 * w // charged near the end of a window
	if !f.AllowN(&s, at+w-1, 1).Allowed() {
		t.Fatal("first admission refused")
	}
	next := 11 * w
	if !f.AllowN(&s, next, 2).Allowed() { // the next window, full
		t.Fatal("the next window's admissions refused")
	}
	f.Refund(&s, at+w-1, 1) // the first request's outcome: not counted
	if d := f.AllowN(&s, next+1, 1); d.Allowed() {
		t.Fatalf("the next window admitted a third request after a refund of the previous window's: %+v", d)
	}
}

func TestFixedWindowRefundGivesBackInItsWindow(t *testing.T) {
	f, _ := NewFixedWindow(2, time.Minute)
	var s FixedWindowState
	now := int64(5 * time.Minute)
	f.AllowN(&s, now, 2)
	f.Refund(&s, now, 1)
	if d := f.AllowN(&s, now+1, 1); !d.Allowed() {
		t.Fatalf("a refund in the admission's window gave nothing back: %+v", d)
	}
}

func TestSlidingWindowRefundGoesToTheWindowThatCounted(t *testing.T) {
	const w = int64(time.Minute)
	sw, err := NewSlidingWindow(4, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var s SlidingWindowState
	at := 10*w + w/2
	if !sw.AllowN(&s, at, 2).Allowed() {
		t.Fatal("first admissions refused")
	}
	next := 11*w + w/2 // the previous window's 2 weigh 1
	if !sw.AllowN(&s, next, 3).Allowed() {
		t.Fatal("the next window's admissions refused")
	}
	sw.Refund(&s, at, 2) // the first two did not count after all
	// The previous window is empty now: 4 - 3 = 1 more fits, not 2.
	if d := sw.AllowN(&s, next, 1); !d.Allowed() {
		t.Fatalf("the refund of the previous window's admissions gave nothing back: %+v", d)
	}
	if d := sw.AllowN(&s, next, 1); d.Allowed() {
		t.Fatalf("the refund went to the current window: a fifth admission %+v", d)
	}
}
