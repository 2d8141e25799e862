package streamshed_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed/streamshed"
)

// TestMessageAllocatesNothing: counting a message within the limit is one
// compare-and-swap, no allocation.
func TestMessageAllocatesNothing(t *testing.T) {
	g, _ := newGuard(t, nil, streamshed.WithMessageLimit(1, ratelimit.Per(1, time.Nanosecond)))
	conn, _, err := g.Open(context.Background(), alice())
	if err != nil || conn == nil {
		t.Fatal(err)
	}
	defer conn.Done()
	now := int64(time.Hour)
	if n := testing.AllocsPerRun(1000, func() {
		now++ // a token a nanosecond: every message is within the limit
		if err := conn.MessageAt(now); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per message", n)
	}
}

// BenchmarkMessage measures counting one message within the limit, with
// the clock read (Message) and with now passed in (MessageAt).
func BenchmarkMessage(b *testing.B) {
	for _, name := range []string{"Message", "MessageAt"} {
		b.Run(name, func(b *testing.B) {
			g, _ := newGuard(b, nil, streamshed.WithMessageLimit(1<<20, ratelimit.Per(1, time.Nanosecond)))
			conn, _, err := g.Open(context.Background(), alice())
			if err != nil || conn == nil {
				b.Fatal(err)
			}
			defer conn.Done()
			now := int64(time.Hour)
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if name == "Message" {
					err = conn.Message()
				} else {
					now++
					err = conn.MessageAt(now)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
