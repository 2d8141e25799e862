package shed

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/penalty"
)

// floodKeys is the size of the key floods: small for CI (200,000, or
// 20,000 under the race detector), 10,000,000 for the figures
// (go test ./shed -run TestKeyFlood -v -args -flood=10000000).
var floodKeys = flag.Int("flood", 0, "distinct keys of the key-flood tests (0: 200,000, 20,000 under -race)")

// TestKeyFloodPerOverflowPolicy: under a flood of one-request clients many
// times the table's capacity, for each overflow policy: the key table and
// the heap stay bounded, a client over its limit before the flood is still
// over it after (no reset), and no newcomer is told it is over a limit or
// struck by the penalty box: a full table is the server's condition (503)
// or the shared overflow bucket's. It logs ns per decision of the first
// and the last chunk of the flood.
func TestKeyFloodPerOverflowPolicy(t *testing.T) {
	n := *floodKeys
	if n == 0 {
		n = 200_000
		if raceEnabled {
			n = 20_000
		}
	}
	capacity := min(10_000, max(n/20, 1)) // a flood of 20 times the table at least
	for _, overflow := range []concurrency.Overflow{concurrency.OverflowReject, concurrency.OverflowShare} {
		t.Run(fmt.Sprint(map[concurrency.Overflow]string{concurrency.OverflowReject: "reject", concurrency.OverflowShare: "share"}[overflow]), func(t *testing.T) {
			box, err := penalty.NewBox(1024, penalty.WithStrikes(1, time.Hour), penalty.WithTimeouts(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			clk := newFakeClock()
			c, err := New([]Rule{{Name: "per-ip", Identity: IP, Algorithm: FixedWindow, Limit: 3, Window: time.Hour,
				Capacity: capacity, Overflow: overflow, CGNATFactor: 1}},
				WithClock(clk.now), quiet(), WithPenalties(box, IP))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			ask := func(ip netip.Addr) Decision {
				d, tok, err := c.Decide(ctx, Attempt{IP: ip})
				if err != nil {
					t.Fatal(err)
				}
				tok.Done(Success)
				return d
			}
			victim := netip.MustParseAddr("192.0.2.66")
			for range 3 {
				ask(victim)
			}
			if d := ask(victim); d.Allowed || d.Kind != OverLimit {
				t.Fatalf("the victim's fourth request: %+v, want over its limit", d)
			}
			before := c.Stats()
			heap := func() uint64 {
				var m runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m)
				return m.HeapAlloc
			}
			h0 := heap()
			chunk := max(n/10, 1)
			var first, last time.Duration
			shed, kinds := 0, map[Kind]int{}
			for start := 0; start < n; start += chunk {
				began := time.Now()
				for i := start; i < min(n, start+chunk); i++ {
					d := ask(floodAddr(i))
					if !d.Allowed {
						shed++
						kinds[d.Kind]++
					}
				}
				took := time.Since(began)
				if start == 0 {
					first = took
				}
				last = took
				clk.add(time.Millisecond)
			}
			grown := int64(heap()) - int64(h0)
			after := c.Stats()
			rs := after.Rules[0]
			t.Logf("%d keys: %d shed (%v), table %d/%d entries, heap %+d bytes, ns/decision first %d%% %.0f, last %.0f, peak RSS %s",
				n, shed, kinds, rs.Table.Entries, rs.Table.Capacity, grown, 100*chunk/n,
				float64(first.Nanoseconds())/float64(chunk), float64(last.Nanoseconds())/float64(chunk), peakRSS())
			if rs.Table.Entries > int64(capacity) {
				t.Errorf("the table holds %d entries, above its capacity %d", rs.Table.Entries, capacity)
			}
			if grown > 8<<20 {
				t.Errorf("the heap grew by %d bytes during the flood: memory is not bounded", grown)
			}
			if kinds[OverLimit] != 0 || kinds[Penalized] != 0 {
				t.Errorf("newcomers told they are over a limit or penalized: %v", kinds)
			}
			if after.Strikes != before.Strikes || after.OverLimit != before.OverLimit {
				t.Errorf("strikes %d -> %d, over-limit %d -> %d during the flood of newcomers",
					before.Strikes, after.Strikes, before.OverLimit, after.OverLimit)
			}
			if n > 2*capacity && rs.Overflowed == 0 {
				t.Errorf("no overflow counted for %d keys in a table of %d", n, capacity)
			}
			if overflow == concurrency.OverflowReject && n > 2*capacity && kinds[Shedding] == 0 {
				t.Error("a rejecting table full of live keys shed nobody")
			}
			if d := ask(victim); d.Allowed || d.Kind == Shedding {
				t.Fatalf("the victim after the flood: %+v, want still over its limit or penalized (no reset)", d)
			}
		})
	}
}

// floodAddr is the i-th flood address: IPv4 from 10.0.0.0 on (16 million),
// then IPv6 /64s.
func floodAddr(i int) netip.Addr {
	if i < 1<<24 {
		return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	}
	var b [16]byte
	b[0], b[1], b[4], b[5], b[6], b[7] = 0x20, 0x01, byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
	return netip.AddrFrom16(b)
}

// peakRSS is the process's peak resident set (VmHWM), where the system
// reports it.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
