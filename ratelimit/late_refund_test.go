package ratelimit

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// lateAdmission is an admission of a late-refund run: what it took, when,
// and what a refund of it needs.
type lateAdmission struct {
	at, n    int64
	refunded bool
}

// TestLateRefundsNeverOverAdmit: a caller that refunds an admission when
// it learns that the admission does not count (a rule that counts only
// failures, at the end of a request) may do so long after it, once the
// admissions since have used the state. However late the refunds, passed
// the admission's own now, the admissions not refunded stay within each
// window's and the log's bound in every span: a refund gives back only
// what its admission still weighs. (A token bucket cannot promise this:
// see GCRA.Refund.)
func TestLateRefundsNeverOverAdmit(t *testing.T) {
	for _, name := range []string{"fixed_window", "sliding_window", "sliding_log"} {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				limit := rapid.Int64Range(1, 6).Draw(t, "limit")
				window := int64(MinWindow) + rapid.Int64Range(0, 400).Draw(t, "window")
				allow, refund, bound := lateSubject(t, name, limit, window)
				var log []lateAdmission
				now := int64(1) << 30
				t.Repeat(map[string]func(*rapid.T){
					"allow": func(t *rapid.T) {
						n := rapid.Int64Range(1, limit).Draw(t, "n")
						if a, ok := allow(now, n); ok {
							log = append(log, a)
						}
					},
					"refund": func(t *rapid.T) {
						if len(log) == 0 {
							t.Skip("nothing admitted")
						}
						a := &log[rapid.IntRange(0, len(log)-1).Draw(t, "which")]
						if a.refunded {
							t.Skip("refunded already")
						}
						refund(now, a)
						a.refunded = true
					},
					"advance": func(t *rapid.T) { now += rapid.Int64Range(0, window).Draw(t, "dt") },
					"": func(t *rapid.T) {
						var kept []rateAdmission
						for _, a := range log {
							if !a.refunded {
								kept = append(kept, rateAdmission{a.at, a.n})
							}
						}
						if err := checkRateBound(bound, limit, window, kept); err != "" {
							t.Fatal(err)
						}
					},
				})
			})
		})
	}
}

// lateSubject builds the limiter name of limit per window and returns its
// admission, its refund of an admission at a later now, and the rateImpl
// whose bound it keeps.
func lateSubject(t *rapid.T, name string, limit, window int64) (
	allow func(now, n int64) (lateAdmission, bool), refund func(now int64, a *lateAdmission), bound rateImpl) {
	impls := rateImpls()
	find := func(n string) rateImpl {
		for _, impl := range impls {
			if impl.name == n {
				return impl
			}
		}
		t.Fatalf("no rateImpl %q", n)
		return rateImpl{}
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	admitted := func(now, n int64, d Decision) (lateAdmission, bool) {
		return lateAdmission{at: now, n: n}, d.Allowed()
	}
	switch name {
	case "fixed_window":
		f, err := NewFixedWindow(limit, time.Duration(window))
		must(err)
		var s FixedWindowState
		return func(now, n int64) (lateAdmission, bool) { return admitted(now, n, f.AllowN(&s, now, n)) },
			func(_ int64, a *lateAdmission) { f.Refund(&s, a.at, a.n) },
			find("fixed_window")
	case "sliding_window":
		sw, err := NewSlidingWindow(limit, time.Duration(window))
		must(err)
		var s SlidingWindowState
		return func(now, n int64) (lateAdmission, bool) { return admitted(now, n, sw.AllowN(&s, now, n)) },
			func(_ int64, a *lateAdmission) { sw.Refund(&s, a.at, a.n) },
			find("sliding_window")
	default:
		l, err := NewSlidingLog(limit, time.Duration(window))
		must(err)
		var s SlidingLogState
		return func(now, n int64) (lateAdmission, bool) { return admitted(now, n, l.AllowN(&s, now, n)) },
			func(_ int64, a *lateAdmission) { l.Refund(&s, a.at, a.n) },
			find("sliding_log")
	}
}

// TestLateBucketRefundsNeverOverAdmit: a token bucket's late refunds
// (RefundLate, RefundLateTo) keep the bound when no refund of an earlier
// admission has moved the refunded one's tokens (RefundLate's limit):
// however late, they leave the admissions not refunded within burst +
// rate·T in every span.
func TestLateBucketRefundsNeverOverAdmit(t *testing.T) {
	gcra := rateImpls()[0]
	for _, sharded := range []bool{false, true} {
		t.Run(fmt.Sprint("sharded=", sharded), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				limit := rapid.Int64Range(1, 6).Draw(t, "limit")
				window := int64(MinWindow) + rapid.Int64Range(0, 400).Draw(t, "window")
				rate := Per(limit, time.Duration(window))
				type admission struct {
					at, n, until int64
					from         Origin
					seq          int // the step that admitted it
					refunded     int // the step that refunded it, or 0
				}
				var allow func(now, n int64) (Decision, Origin)
				var refund func(now int64, a admission)
				if sharded {
					shards := rapid.SampledFrom([]int{1, 2, 4}).Draw(t, "shards")
					b, err := NewShardedBucket(rate, limit, WithShardCount(shards))
					if err != nil {
						t.Fatal(err)
					}
					allow = b.AllowNOrigin
					refund = func(now int64, a admission) { b.RefundLateTo(a.from, a.at, now, a.n, a.until) }
				} else {
					b, err := NewTokenBucket(rate, limit)
					if err != nil {
						t.Fatal(err)
					}
					allow = func(now, n int64) (Decision, Origin) { return b.AllowN(now, n), 0 }
					refund = func(now int64, a admission) { b.RefundLate(a.at, now, a.n, a.until) }
				}
				var log []admission
				now, step := int64(1)<<30, 0
				// moved reports whether a refund of an admission before log[i]
				// came after log[i] was made.
				moved := func(i int) bool {
					for _, a := range log[:i] {
						if a.refunded > log[i].seq {
							return true
						}
					}
					return false
				}
				t.Repeat(map[string]func(*rapid.T){
					"allow": func(t *rapid.T) {
						step++
						n := rapid.Int64Range(1, limit).Draw(t, "n")
						if d, o := allow(now, n); d.Allowed() {
							log = append(log, admission{at: now, n: n, until: now + int64(d.ResetAfter), from: o, seq: step})
						}
					},
					"refund": func(t *rapid.T) {
						step++
						var can []int
						for i := range log {
							if log[i].refunded == 0 && !moved(i) {
								can = append(can, i)
							}
						}
						if len(can) == 0 {
							t.Skip("nothing to refund")
						}
						i := rapid.SampledFrom(can).Draw(t, "which")
						refund(now, log[i])
						log[i].refunded = step
					},
					"advance": func(t *rapid.T) { now += rapid.Int64Range(0, window).Draw(t, "dt") },
					"": func(t *rapid.T) {
						var kept []rateAdmission
						for _, a := range log {
							if a.refunded == 0 {
								kept = append(kept, rateAdmission{a.at, a.n})
							}
						}
						if err := checkRateBound(gcra, limit, window, kept); err != "" {
							t.Fatal(err)
						}
					},
				})
			})
		})
	}
}

// TestRefundLateGivesBackWhatTheTokensStillWeigh: a bucket of 4 a second
// (250 ms a token) admits 2 at 0 (paid off at 500 ms) and 1 at 600 ms: a
// refund of the 2 at 600 ms gives nothing (refilled at 500 ms); admitted
// instead at 400 ms (paid off at 900 ms), with 1 taken at 600 ms, a refund
// at 600 ms gives back the 300 ms still owed; at the admission's own now
// it is Refund.
func TestRefundLateGivesBackWhatTheTokensStillWeigh(t *testing.T) {
	const ms = int64(time.Millisecond)
	mk := func() *TokenBucket {
		b, err := NewTokenBucket(Per(4, time.Second), 4)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := mk()
	first := b.AllowN(0, 2)
	b.AllowN(600*ms, 1)
	b.RefundLate(0, 600*ms, 2, int64(first.ResetAfter))
	if d := b.AllowN(600*ms, 0); d.Remaining != 3 || d.ResetAfter != 250*time.Millisecond {
		t.Fatalf("after a refund of 2 refilled before it: %+v, want 3 left, full in 250ms", d)
	}
	b = mk()
	first = b.AllowN(400*ms, 2)
	b.AllowN(600*ms, 1)
	b.RefundLate(400*ms, 600*ms, 2, 400*ms+int64(first.ResetAfter))
	// Owed at 600 ms before the refund: 300 ms of the 2, 250 ms of the 1.
	if d := b.AllowN(600*ms, 0); d.ResetAfter != 250*time.Millisecond {
		t.Fatalf("after a refund of 2 still owing 300ms: %+v, want full in 250ms", d)
	}
	b = mk()
	first = b.AllowN(400*ms, 2)
	b.RefundLate(400*ms, 400*ms, 2, 400*ms+int64(first.ResetAfter))
	if d := b.AllowN(400*ms, 0); d.Remaining != 4 {
		t.Fatalf("a refund at the admission's now: %+v, want full", d)
	}
}
