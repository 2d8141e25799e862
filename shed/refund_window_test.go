package shed

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestRefundAfterItsWindowGivesTheNextWindowNothing: an attempt that does
// not count (a success under CountFailures) is refunded when it ends; if
// it ends after its window did, and the next window has counted others to
// its limit, the refund must not open room there.
func TestRefundAfterItsWindowGivesTheNextWindowNothing(t *testing.T) {
	for _, identity := range []Identity{Global, Tenant} {
		t.Run(identity.String(), func(t *testing.T) {
			clk := newFakeClock()
			clk.t.Store(int64(100 * time.Minute)) // a window's start
			rule := Rule{Name: "w", Identity: identity, Algorithm: FixedWindow, Limit: 2, Window: time.Minute, Count: CountFailures}
			c, err := New([]Rule{rule}, WithClock(clk.now), quiet())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			attempt := Attempt{Tenant: "acme"}
			clk.add(time.Minute - time.Second)
			_, slow, err := c.Decide(ctx, attempt) // near the end of its window
			if err != nil {
				t.Fatal(err)
			}
			clk.add(2 * time.Second) // the next window
			for i := range 2 {
				d, tok, err := c.Decide(ctx, attempt)
				if err != nil || !d.Allowed {
					t.Fatalf("the next window's attempt %d: %+v %v", i, d, err)
				}
				tok.DoneStatus(http.StatusInternalServerError) // counts
			}
			slow.DoneStatus(http.StatusOK) // does not count: refunded, to its own window
			d, tok, err := c.Decide(ctx, attempt)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				tok.DoneStatus(http.StatusInternalServerError)
				t.Fatal(fmt.Sprint("the next window admitted a third attempt after the refund of the previous window's: ", d))
			}
		})
	}
}
