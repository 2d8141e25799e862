package streamshed_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/streamshed"
)

// TestMessagesNeverPassTheBucketAndEndOnce: for any message limit and any
// arrival times, the messages taken are a prefix of those sent; in any
// interval between two of them no more than burst + rate·T are taken; the
// first one refused ends the Conn with exactly one close 1008 and its
// permit back, and every later one gets ErrEnded.
func TestMessagesNeverPassTheBucketAndEndOnce(t *testing.T) {
	c, err := shed.New([]shed.Rule{{Name: "open-user", Category: streamshed.DefaultCategory,
		Identity: shed.User, Algorithm: shed.Concurrency, Limit: 1, LeaseTTL: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rapid.Check(t, func(t *rapid.T) {
		burst := rapid.Int64Range(1, 20).Draw(t, "burst")
		count := rapid.Int64Range(1, 20).Draw(t, "count")
		per := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(2*time.Second)).Draw(t, "per"))
		gaps := rapid.SliceOfN(rapid.Int64Range(0, int64(300*time.Millisecond)), 1, 200).Draw(t, "gaps")
		g, err := streamshed.NewGuard(c, streamshed.WithMessageLimit(burst, ratelimit.Per(count, per)))
		if err != nil {
			t.Skip(err) // a rate faster than 1/ns
		}
		conn, _, err := g.Open(context.Background(), shed.Attempt{User: "alice"})
		if err != nil || conn == nil {
			t.Fatalf("open: %v (a permit leaked by an earlier run?)", err)
		}
		defer conn.Done()
		var cl closes
		conn.Bind(cl.Close)
		now := int64(time.Hour)
		var taken []int64
		violated := false
		for i, gap := range gaps {
			now += gap
			err := conn.MessageAt(now)
			switch {
			case err == nil:
				if violated {
					t.Fatalf("message %d taken after the violation", i)
				}
				taken = append(taken, now)
			case errors.Is(err, streamshed.ErrPolicyViolation):
				if violated {
					t.Fatalf("message %d: a second violation", i)
				}
				violated = true
			case errors.Is(err, streamshed.ErrEnded):
				if !violated {
					t.Fatalf("message %d: ended without a violation", i)
				}
			default:
				t.Fatalf("message %d: %v", i, err)
			}
		}
		for i := range taken {
			for j := i; j < len(taken); j++ {
				span := taken[j] - taken[i]
				// burst + rate·T, rate·T rounded down (span·count stays far below 2^63)
				if n, bound := int64(j-i+1), burst+span*count/int64(per); n > bound {
					t.Fatalf("%d messages in %v, bound %d", n, time.Duration(span), bound)
				}
			}
		}
		calls := cl.Calls()
		if violated != (len(calls) == 1) || len(calls) > 1 || (violated && calls[0].code != streamshed.PolicyViolation) {
			t.Fatalf("violated %v, close calls %+v", violated, calls)
		}
		if violated && c.Stats().Inflight != 0 {
			t.Fatalf("inflight %d after the violation", c.Stats().Inflight)
		}
	})
}
