package shed

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"
)

func TestEarlyWarning(t *testing.T) {
	var got []EarlyWarning
	c, err := New([]Rule{
		{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 10, Window: time.Minute},
		{Name: "log", Identity: User, Algorithm: SlidingLog, Limit: 10, Window: time.Minute},
	}, quiet(), WithEarlyWarning(func(w EarlyWarning) { got = append(got, w) }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	window := int64(time.Minute)
	send := func(ip string, n int, now int64) {
		for range n {
			d, tok, err := c.Decide(context.Background(), Attempt{IP: netip.MustParseAddr(ip), User: "u" + ip, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			tok.DoneAt(now, Success)
			_ = d
		}
	}
	// 5 of 10 at 5 s into the window: a warning, once.
	send("192.0.2.1", 8, 100*window+int64(5*time.Second))
	// 5 of 10 at 30 s into the window: none.
	send("192.0.2.2", 8, 100*window+int64(30*time.Second))
	// 4 of 10 early: none.
	send("192.0.2.3", 4, 101*window+int64(time.Second))
	if len(got) != 1 {
		t.Fatalf("warnings %+v, want one", got)
	}
	w := got[0]
	if w.Rule != "ip" || w.Key != "ip:192.0.2.1" || w.Used != 5 || w.Limit != 10 || w.Elapsed != 5*time.Second || w.Window != time.Minute {
		t.Fatalf("warning %+v", w)
	}
	// A flood of keys crossing in one second: the hook gets the burst, the
	// counters get them all.
	got = nil
	now := 200*window + int64(time.Second)
	for i := range 100 {
		send(fmt.Sprintf("198.51.100.%d", i), 5, now)
	}
	st := c.Stats()
	if len(got) != EarlyWarningBurst || st.EarlyWarnings != 101 || st.EarlyWarningsHeld != 100-EarlyWarningBurst {
		t.Fatalf("hook got %d, stats %d held %d", len(got), st.EarlyWarnings, st.EarlyWarningsHeld)
	}
	if st.Rules[0].EarlyWarnings != 101 || st.Rules[1].EarlyWarnings != 0 {
		t.Fatalf("rule counters %+v", st.Rules)
	}
	// The next second lets warnings through again.
	send("203.0.113.1", 5, now+int64(time.Second))
	if len(got) != EarlyWarningBurst+1 {
		t.Fatalf("hook got %d after a second", len(got))
	}
}
