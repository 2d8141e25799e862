package grpcshed

import (
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"pgregory.net/rapid"
)

// TestRetryBudgetNeverLendsMoreThanItEarned: after any interleaving of
// calls and retries, the retries granted are at most the burst plus ratio
// of the calls, and a retry is refused only when less than one is left.
func TestRetryBudgetNeverLendsMoreThanItEarned(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ratio := rapid.Float64Range(0, 1).Draw(t, "ratio")
		burst := rapid.IntRange(1, 20).Draw(t, "burst")
		var b retryBudget
		b.init(ratio, burst)
		var calls, granted int64
		for _, isCall := range rapid.SliceOf(rapid.Bool()).Draw(t, "ops") {
			if isCall {
				b.deposit()
				calls++
				continue
			}
			before := b.balance.Load()
			if b.withdraw() {
				granted++
			} else if before >= budgetUnit {
				t.Fatalf("refused a retry with %d millionths left", before)
			}
			earned := int64(burst)*budgetUnit + calls*b.ratio
			if granted*budgetUnit > earned {
				t.Fatalf("%d retries granted for %d calls, ratio %v, burst %d", granted, calls, ratio, burst)
			}
			if bal := b.balance.Load(); bal < 0 || bal > b.limit {
				t.Fatalf("balance %d outside [0, %d]", bal, b.limit)
			}
		}
	})
}

func TestRetryBudgetConcurrentWithdrawalsStayWithinIt(t *testing.T) {
	var b retryBudget
	b.init(0, 50)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if b.withdraw() {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if granted != 50 {
		t.Fatalf("%d retries granted from a budget of 50, want exactly 50", granted)
	}
}

// FuzzRetryDelay feeds retryDelay what a server may send: a pushback
// trailer and a RetryInfo of any duration. It must not panic, never
// returns a negative delay, and never one earlier than a valid pushback.
func FuzzRetryDelay(f *testing.F) {
	f.Add("1000", int64(1), int32(0))
	f.Add("-1", int64(0), int32(5))
	f.Add("9223372036854775807", int64(math.MaxInt64), int32(999999999))
	f.Add("", int64(-5), int32(-1))
	f.Fuzz(func(t *testing.T, pushback string, secs int64, nanos int32) {
		st := status.New(codes.Unavailable, "x")
		if s, err := st.WithDetails(retryInfoOf(secs, nanos)); err == nil {
			st = s
		}
		var md metadata.MD
		if pushback != "" {
			md = metadata.Pairs(PushbackKey, pushback)
		}
		d, ok := retryDelay(st, md)
		if d < 0 {
			t.Fatalf("delay %v from pushback %q, RetryInfo %ds %dns", d, pushback, secs, nanos)
		}
		if !ok && d != 0 {
			t.Fatalf("no hint but a delay %v", d)
		}
		if ms, err := strconv.ParseInt(pushback, 10, 64); err == nil && ms >= 0 {
			want := time.Duration(min(ms, int64(math.MaxInt64/time.Millisecond))) * time.Millisecond
			if !ok || d < want {
				t.Fatalf("pushback %q: delay %v (found %v), want at least %v", pushback, d, ok, want)
			}
		}
	})
}

func retryInfoOf(secs int64, nanos int32) *errdetails.RetryInfo {
	return &errdetails.RetryInfo{RetryDelay: &durationpb.Duration{Seconds: secs, Nanos: nanos}}
}
