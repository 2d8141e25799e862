package shed

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"pgregory.net/rapid"
)

// floodPeer is the address of flood client i: one /64 each of the /48
// 2001:db8:f100::/48.
func floodPeer(i int) string { return fmt.Sprintf("[2001:db8:f100:%x::1]", i) }

// TestPrefixOverflowServesNewcomersOfOtherNetworks: while a flood from one
// IPv6 /48 holds a per-IP rule's full table, a newcomer from another
// network is decided on its own prefix and served; one more address of the
// flooding /48 meets its spent prefix: 503 with the prefix's Retry-After,
// never a 429, never a strike.
func TestPrefixOverflowServesNewcomersOfOtherNetworks(t *testing.T) {
	pen := &fakePenalties{strikes: map[string]int{}}
	logs := &countHandler{}
	c, h, _ := newTest(t, []Rule{{Name: "api-ip", Identity: IP, Algorithm: SlidingLog, Limit: 5, Window: time.Hour,
		Capacity: 16, Overflow: OverflowPrefix}}, WithPenalties(pen, IP), WithLogger(slog.New(logs)))
	// A client that spent its limit before the flood.
	for range 5 {
		send(h, "192.0.2.7")
	}
	if w := send(h, "192.0.2.7"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("a client over its limit: %d", w.Code)
	}
	// The flood: one request from each of 200 /64s of one /48. The first
	// fill the table, the next spend the /48's limit (5 × 4).
	var floodShed int
	for i := range 200 {
		switch w := send(h, floodPeer(i)); w.Code {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			floodShed++
		default:
			t.Fatalf("flood request %d: %d", i, w.Code)
		}
	}
	if floodShed == 0 {
		t.Fatal("the flood spent neither the table nor its prefix: the test says nothing")
	}
	// A newcomer from another network: served, up to its own limit.
	for try := range 5 {
		if w := send(h, "203.0.113.9"); w.Code != http.StatusOK {
			t.Fatalf("newcomer of another network, request %d during the flood: %d", try, w.Code)
		}
	}
	// One more address of the flooding /48 is not.
	w := send(h, floodPeer(1000))
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("newcomer of the flooding /48: %d, want 503", w.Code)
	}
	if ra, _ := strconv.Atoi(w.Header().Get("Retry-After")); ra < 60 {
		t.Fatalf("newcomer of the flooding /48: Retry-After %q, want when the /48's limit has room (about an hour)", w.Header().Get("Retry-After"))
	}
	// The client over its limit stays over it: its key was neither
	// evicted nor moved to its prefix.
	if w := send(h, "192.0.2.7"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("the client over its limit, after the flood: %d; its limit was reset", w.Code)
	}
	s := c.Stats()
	if s.OverLimit != 2 || s.Strikes != 2 || len(pen.strikes) != 1 {
		t.Fatalf("%d over-limit rejections, %d strikes (%v): want the limited client's 2 and none for the server's full table",
			s.OverLimit, s.Strikes, pen.strikes)
	}
	if n := logs.n.Load(); n != 1 { // the clock stood still: one second
		t.Fatalf("%d log lines for a second of prefix decisions, want 1", n)
	}
	rs := s.Rules[0]
	if rs.OverflowPrefix == 0 || rs.Overflowed < rs.OverflowPrefix {
		t.Fatalf("prefix decisions not counted among the overflowed: %+v", rs)
	}
	hot, err := c.HotKeys(100)
	if err != nil {
		t.Fatal(err)
	}
	var scopes []string
	for _, k := range hot {
		scopes = append(scopes, k.Scope)
	}
	if !strings.Contains(strings.Join(scopes, ","), "prefix") {
		t.Fatalf("no hot key of scope prefix: %q", scopes)
	}
}

// TestPrefixOverflowFullPrefixTableSheds: when the prefix table is full
// too, a newcomer gets OverflowReject's answer, 503 and Retry-After 1, no
// strike.
func TestPrefixOverflowFullPrefixTableSheds(t *testing.T) {
	pen := &fakePenalties{strikes: map[string]int{}}
	c, h, _ := newTest(t, []Rule{{Name: "api-ip", Identity: IP, Algorithm: SlidingLog, Limit: 5, Window: time.Hour,
		Capacity: 16, Overflow: OverflowPrefix, Prefix: Prefix{IPv4: 16}}}, WithPenalties(pen, IP))
	// One request from each of 256 /16s: the per-IP table, then the
	// prefix table (at most the rule's 16 keys) fill up.
	for i := range 256 {
		send(h, fmt.Sprintf("%d.%d.0.1", 10+i/128, i%128*2))
	}
	for try := range 4 {
		w := send(h, "203.0.113.9")
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
			t.Fatalf("newcomer try %d, prefix table full: %d, Retry-After %q; want 503 and 1", try, w.Code, w.Header().Get("Retry-After"))
		}
	}
	s := c.Stats()
	if s.OverLimit != 0 || s.Strikes != 0 || len(pen.strikes) != 0 {
		t.Fatalf("%d over-limit rejections, %d strikes for the server's full tables", s.OverLimit, s.Strikes)
	}
	if rs := s.Rules[0]; rs.OverflowPrefix == 0 || rs.Table.Overflows == 0 {
		t.Fatalf("overflow not counted: %+v", rs)
	}
}

// TestPrefixOverflowValidation: a prefix overflow is for IP rules, its
// parameters are checked, never clamped.
func TestPrefixOverflowValidation(t *testing.T) {
	base := Rule{Name: "r", Identity: IP, Algorithm: SlidingLog, Limit: 5, Window: time.Hour, Overflow: OverflowPrefix}
	for name, mod := range map[string]func(*Rule){
		"user rule":          func(r *Rule) { r.Identity = User },
		"global rule":        func(r *Rule) { r.Identity = Global },
		"prefix without it":  func(r *Rule) { r.Overflow = concurrency.OverflowShare; r.Prefix.IPv4 = 24 },
		"unknown overflow":   func(r *Rule) { r.Overflow = OverflowPrefix + 1 },
		"ipv4 bits negative": func(r *Rule) { r.Prefix.IPv4 = -1 },
		"ipv4 bits 33":       func(r *Rule) { r.Prefix.IPv4 = 33 },
		"ipv6 bits 129":      func(r *Rule) { r.Prefix.IPv6 = 129 },
		"factor NaN":         func(r *Rule) { r.Prefix.Factor = math.NaN() },
		"factor +Inf":        func(r *Rule) { r.Prefix.Factor = math.Inf(1) },
		"factor negative":    func(r *Rule) { r.Prefix.Factor = -2 },
		"factor too large":   func(r *Rule) { r.Prefix.Factor = 1e300 },
	} {
		r := base
		mod(&r)
		if c, err := New([]Rule{r}, quiet()); err == nil {
			_ = c.Close()
			t.Errorf("%s: accepted", name)
		} else if !strings.HasPrefix(err.Error(), "shed: ") {
			t.Errorf("%s: error %q does not start with the package name", name, err)
		}
	}
	r := base
	r.Prefix = Prefix{IPv4: 32, IPv6: 128, Factor: 0.5}
	c, err := New([]Rule{r}, quiet())
	if err != nil {
		t.Fatalf("valid prefix rejected: %v", err)
	}
	_ = c.Close()
}

// TestPrefixOverflowBoundsAdmissions: whatever the addresses and times, no
// address is admitted more than Limit + ceil(Limit·Factor) times in any
// window, and no prefix more than Limit per address of it plus
// ceil(Limit·Factor): the prefix allowance is all a full table adds.
func TestPrefixOverflowBoundsAdmissions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const limit, window = 3, time.Minute
		factor := rapid.SampledFrom([]float64{0.5, 1, 2, 4}).Draw(t, "factor")
		allowance := int(math.Ceil(limit * factor))
		clk := newFakeClock()
		c, err := New([]Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: limit, Window: window,
			Capacity: 4, Overflow: OverflowPrefix, Prefix: Prefix{Factor: factor}}}, WithClock(clk.now), quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		type admission struct {
			at   int64
			addr netip.Addr
		}
		var admitted []admission
		prefixOf := func(a netip.Addr) netip.Prefix {
			p, _ := a.Prefix(DefaultPrefixIPv4)
			return p
		}
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			if rapid.IntRange(0, 4).Draw(t, "move") == 0 {
				clk.add(time.Duration(rapid.Int64Range(0, int64(window)).Draw(t, "dt")))
			}
			// Few networks, few hosts each: collisions on keys and prefixes.
			addr := netip.AddrFrom4([4]byte{192, 0, byte(rapid.IntRange(0, 3).Draw(t, "net")), byte(rapid.IntRange(1, 6).Draw(t, "host"))})
			d, tok, err := c.Decide(context.Background(), Attempt{IP: addr})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				tok.Done(Success)
				admitted = append(admitted, admission{clk.now(), addr})
			}
		}
		// Every window ending at an admission.
		for i, end := range admitted {
			perAddr := map[netip.Addr]int{}
			perPrefix := map[netip.Prefix]int{}
			addrs := map[netip.Prefix]map[netip.Addr]bool{}
			for _, a := range admitted[:i+1] {
				if a.at <= end.at-int64(window) {
					continue
				}
				perAddr[a.addr]++
				p := prefixOf(a.addr)
				perPrefix[p]++
				if addrs[p] == nil {
					addrs[p] = map[netip.Addr]bool{}
				}
				addrs[p][a.addr] = true
			}
			for a, n := range perAddr {
				if n > limit+allowance {
					t.Fatalf("%v admitted %d times in a window: more than %d + %d", a, n, limit, allowance)
				}
			}
			for p, n := range perPrefix {
				if bound := limit*len(addrs[p]) + allowance; n > bound {
					t.Fatalf("prefix %v admitted %d times in a window: more than %d", p, n, bound)
				}
			}
		}
		if s := c.Stats(); s.Strikes != 0 {
			t.Fatalf("%d strikes", s.Strikes)
		}
	})
}

// TestPrefixOverflowAllOrNothing: a prefix is charged only by the
// decisions it is part of: a newcomer decided on its prefix and rejected by
// another rule (its user's limit) gives the prefix back what it took, and
// a client that overflowed on its prefix but passed its own limit is not
// told it is over anything.
func TestPrefixOverflowAllOrNothing(t *testing.T) {
	c, _, _ := newTest(t, []Rule{
		{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 5, Window: time.Hour, Capacity: 16,
			Overflow: OverflowPrefix, Prefix: Prefix{Factor: 0.4}}, // 2 per /24
		{Name: "user", Identity: User, Algorithm: SlidingLog, Limit: 1, Window: time.Hour},
	})
	ctx := context.Background()
	decide := func(ip, user string) Decision {
		d, tok, err := c.Decide(ctx, Attempt{IP: netip.MustParseAddr(ip), User: user})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			tok.Done(Success)
		}
		return d
	}
	for i := range 64 { // the flood fills the table
		decide(fmt.Sprintf("198.18.0.%d", i), "")
	}
	if d := decide("203.0.113.9", "u"); !d.Allowed {
		t.Fatalf("newcomer on its prefix: %+v", d)
	}
	for try := range 4 { // over its user's limit: 429 by that rule, the prefix untouched
		if d := decide("203.0.113.9", "u"); d.Allowed || d.Rule != "user" || d.Kind != OverLimit {
			t.Fatalf("try %d over the user's limit: %+v", try, d)
		}
	}
	if d := decide("203.0.113.10", "v"); !d.Allowed {
		t.Fatalf("second newcomer of the /24: %+v; the user rule's rejections spent the prefix", d)
	}
	if d := decide("203.0.113.11", "w"); d.Allowed || d.Kind != Shedding || d.Rule != "ip" {
		t.Fatalf("third newcomer of the /24, its prefix spent: %+v, want shed by ip", d)
	}
}

// TestPrefixOverflowDryRun: a dry-run rule decides an overflowing key on
// its prefix too, and counts what the spent prefix would have shed.
func TestPrefixOverflowDryRun(t *testing.T) {
	c, h, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 5, Window: time.Hour,
		Capacity: 16, Overflow: OverflowPrefix, Prefix: Prefix{Factor: 0.2}, DryRun: true}}) // 1 per prefix
	for i := range 64 {
		if w := send(h, floodPeer(i)); w.Code != http.StatusOK {
			t.Fatalf("dry-run rejected flood request %d: %d", i, w.Code)
		}
	}
	rs := c.Stats().Rules[0]
	if rs.OverflowPrefix == 0 || rs.WouldReject == 0 || rs.Rejected != 0 {
		t.Fatalf("dry-run prefix overflow: %+v", rs)
	}
}

// TestPrefixOverflowReloadKeepsCounts: turning a rule's prefix overflow on,
// or changing its prefix, is a reload that keeps what was counted: a
// client over its limit stays over it.
func TestPrefixOverflowReloadKeepsCounts(t *testing.T) {
	rule := Rule{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 3, Window: time.Hour, Capacity: 16}
	c, _, _ := newTest(t, []Rule{rule})
	ip := netip.MustParseAddr("192.0.2.7")
	decide := func() Decision {
		d, tok, err := c.Decide(context.Background(), Attempt{IP: ip})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			tok.Done(Success)
		}
		return d
	}
	for range 3 {
		decide()
	}
	for step, p := range []Prefix{{}, {IPv4: 16, Factor: 2}} {
		rule.Overflow, rule.Prefix = OverflowPrefix, p
		if err := c.Reload(Config{Rules: []Rule{rule}}); err != nil {
			t.Fatal(err)
		}
		if d := decide(); d.Allowed || d.Kind != OverLimit {
			t.Fatalf("reload %d (prefix %+v): the client over its limit got %+v; its count was lost", step, p, d)
		}
	}
}

// TestPrefixKey: the prefix key of an address is its masked prefix, an
// IPv4-mapped address in its IPv4 prefix, and none without an address.
func TestPrefixKey(t *testing.T) {
	r := &rule{Rule: Rule{Overflow: OverflowPrefix, Prefix: Prefix{IPv4: 20}}}
	for _, tc := range []struct{ ip, want string }{
		{"192.0.2.77", "net:192.0.0.0/20"},
		{"::ffff:192.0.2.77", "net:192.0.0.0/20"},
		{"2001:db8:f100:42::1", "net:2001:db8:f100::/48"},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "net:ffff:ffff:ffff::/48"},
	} {
		a := &ticket{ask: Attempt{IP: netip.MustParseAddr(tc.ip)}}
		if got, ok := a.prefixKey(r); !ok || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.ip, got, ok, tc.want)
		}
	}
	long := &rule{Rule: Rule{Overflow: OverflowPrefix, Prefix: Prefix{IPv6: 128}}}
	a := &ticket{ask: Attempt{IP: netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")}}
	if got, ok := a.prefixKey(long); !ok || len(got) != maxPrefixKey {
		t.Errorf("the longest prefix key: %q, %v; want %d bytes", got, ok, maxPrefixKey)
	}
	if _, ok := (&ticket{}).prefixKey(r); ok {
		t.Error("a prefix key without an address")
	}
}
