package shed

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestHotKeysNameKeysByHashMostUsedFirst: HotKeys reports each per-key
// rule's most used keys, most used first, as hashed keys that never
// contain the client's identity; ResetHash of one gives that client its
// whole limit back, and only that client.
func TestHotKeysNameKeysByHashMostUsedFirst(t *testing.T) {
	c, _, _ := newTest(t, []Rule{
		{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 10, Rate: ratelimit.Per(1, time.Hour)},
		{Name: "user", Identity: User, Algorithm: FixedWindow, Limit: 10, Window: time.Hour},
		{Name: "all", Algorithm: TokenBucket, Limit: 1000, Rate: ratelimit.Per(1000, time.Second)},
	})
	ips := []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}
	for i, ip := range ips {
		for range i + 1 { // 192.0.2.3 sends 3, and so on
			decide(t, c, Attempt{IP: netip.MustParseAddr(ip), User: "alice"})
		}
	}
	got, err := c.HotKeys(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d hot keys, want 2 of ip and 1 of user: %+v", len(got), got)
	}
	if got[0].Rule != "ip" || got[0].Used != 3 || got[1].Rule != "ip" || got[1].Used != 2 || got[0].Remaining != 7 || got[0].Limit != 10 {
		t.Errorf("ip keys: %+v, %+v, want 3 then 2 used of 10", got[0], got[1])
	}
	if got[2].Rule != "user" || got[2].Used != 6 || got[2].ResetAfter <= 0 || got[2].ResetAfter > time.Hour {
		t.Errorf("user key: %+v, want alice's 6 of 10 within the hour", got[2])
	}
	for _, k := range got {
		if len(k.Key) != 18 || !strings.HasPrefix(k.Key, "h:") || strings.Contains(k.Key, "192.0.2") || strings.Contains(k.Key, "alice") {
			t.Errorf("key %q is not a hashed key", k.Key)
		}
	}
	if err := c.ResetHash(context.Background(), "ip", got[0].Key); err != nil {
		t.Fatal(err)
	}
	after, _ := c.HotKeys(MaxListed)
	if len(after) != 3 || after[0].Used != 2 || after[0].Key != got[1].Key {
		t.Errorf("after resetting the hottest ip: %+v", after)
	}
	for _, bad := range []string{"", "192.0.2.3", "h:123", "h:zzzzzzzzzzzzzzzz"} {
		if err := c.ResetHash(context.Background(), "ip", bad); err == nil {
			t.Errorf("ResetHash took %q", bad)
		}
	}
	if err := c.ResetHash(context.Background(), "all", got[1].Key); err == nil {
		t.Error("ResetHash of a Global rule: no error")
	}
	if err := c.ResetHash(context.Background(), "none", got[1].Key); err == nil {
		t.Error("ResetHash of an unknown rule: no error")
	}
	for _, n := range []int{0, MaxListed + 1} {
		if _, err := c.HotKeys(n); err == nil {
			t.Errorf("HotKeys(%d): no error", n)
		}
	}
}

// TestPenalizedListsClientsInATimeout: Penalized reports the clients
// serving a timeout by hashed key, the longest left first; PardonHash of
// one lets it in again at once.
func TestPenalizedListsClientsInATimeout(t *testing.T) {
	box, err := penalty.NewBox(1024, penalty.WithStrikes(1, time.Hour), penalty.WithTimeouts(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	c, _, clk := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 1, Window: time.Hour}},
		WithPenalties(box, IP))
	for _, ip := range []string{"192.0.2.1", "192.0.2.2"} {
		a := Attempt{IP: netip.MustParseAddr(ip)}
		decide(t, c, a)
		if d := decide(t, c, a); d.Allowed {
			t.Fatalf("%s: second admitted", ip)
		}
		clk.add(time.Second)
	}
	got, err := c.Penalized(MaxListed)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Left != time.Minute-time.Second || got[1].Left != time.Minute-2*time.Second || got[0].Level != 1 {
		t.Fatalf("penalized: %+v, want 192.0.2.2 (59 s left) then 192.0.2.1 (58 s)", got)
	}
	if strings.Contains(got[0].Key, "192.0.2") || !strings.HasPrefix(got[0].Key, "h:") {
		t.Errorf("key %q is not a hashed key", got[0].Key)
	}
	if ok, err := c.PardonHash(got[0].Key); !ok || err != nil {
		t.Fatalf("PardonHash: %v, %v", ok, err)
	}
	if d := decide(t, c, Attempt{IP: netip.MustParseAddr("192.0.2.2")}); d.Kind == Penalized {
		t.Errorf("the pardoned client is still in its timeout: %+v", d)
	}
	if d := decide(t, c, Attempt{IP: netip.MustParseAddr("192.0.2.1")}); d.Kind != Penalized {
		t.Errorf("the other client's timeout ended too: %+v", d)
	}
	plain, _, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 1, Window: time.Minute}})
	if _, err := plain.Penalized(1); err == nil {
		t.Error("Penalized without penalties: no error")
	}
	if _, err := plain.PardonHash(got[0].Key); err == nil {
		t.Error("PardonHash without penalties: no error")
	}
}

// FuzzParseHashKey: a hashed key from an action's body is read back only
// when it is one hashKey writes, and then it is exactly that key.
func FuzzParseHashKey(f *testing.F) {
	for _, s := range []string{"h:00000000000000ab", "h:", "h:zzzzzzzzzzzzzzzz", "h:+0000000000000a", "192.0.2.1", "h:FFFFFFFFFFFFFFFF"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parseHashKey(s)
		if err != nil {
			return
		}
		if back := hashKey(h); !strings.EqualFold(back, s) {
			t.Fatalf("%q read as %x, written back as %q", s, h, back)
		}
	})
}
