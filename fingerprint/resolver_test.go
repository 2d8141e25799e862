package fingerprint

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

var (
	proxyNet  = netip.MustParsePrefix("10.0.0.0/8")
	proxyNet6 = netip.MustParsePrefix("fd00::/8")
)

func mustResolver(t testing.TB, opts ...ResolverOption) *Resolver {
	t.Helper()
	r, err := NewResolver(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestResolverHeaderCases(t *testing.T) {
	trusted := WithTrustedProxies(proxyNet, proxyNet6)
	all := WithHeaders(HeaderXForwardedFor, HeaderForwarded, HeaderXRealIP, HeaderTrueClientIP)
	cases := []struct {
		name    string
		opts    []ResolverOption
		peer    string
		headers [][2]string
		want    string
		source  Source
	}{
		{"no proxy configured: header ignored (spoofing)", nil, "203.0.113.9:4000",
			[][2]string{{"X-Forwarded-For", "1.2.3.4"}}, "203.0.113.9", SourcePeer},
		{"untrusted peer: header ignored (spoofing)", []ResolverOption{trusted}, "203.0.113.9:4000",
			[][2]string{{"X-Forwarded-For", "1.2.3.4"}, {"X-Real-Ip", "1.2.3.4"}}, "203.0.113.9", SourcePeer},
		{"untrusted peer: Forwarded ignored", []ResolverOption{trusted, all}, "203.0.113.9:4000",
			[][2]string{{"Forwarded", "for=1.2.3.4"}}, "203.0.113.9", SourcePeer},
		{"trusted peer, one hop", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "198.51.100.7"}}, "198.51.100.7", SourceXForwardedFor},
		{"two trusted proxies: first untrusted hop", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "198.51.100.7, 10.0.0.2"}}, "198.51.100.7", SourceXForwardedFor},
		{"client-written left part is never taken", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "1.2.3.4, 5.6.7.8, 198.51.100.7, 10.0.0.2"}}, "198.51.100.7", SourceXForwardedFor},
		{"client writes a trusted address on the left", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "10.9.9.9, 198.51.100.7"}}, "198.51.100.7", SourceXForwardedFor},
		{"instances merged, last is nearest", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "1.2.3.4"}, {"X-Forwarded-For", "198.51.100.7, 10.0.0.3"}}, "198.51.100.7", SourceXForwardedFor},
		{"instances merged, walk crosses instances", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "1.2.3.4, 198.51.100.7"}, {"X-Forwarded-For", "10.0.0.3"}}, "198.51.100.7", SourceXForwardedFor},
		{"an entry that is no address stops the walk at the proxy", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "1.2.3.4,198.51.100.7 , garbage,, 10.0.0.2,unknown"}}, "10.0.0.1", SourceHidden},
		{"unknown: the trusted proxy, not the client-written entry", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "6.6.6.6, unknown"}}, "10.0.0.1", SourceHidden},
		{"unix: the trusted proxy, not the client-written entry", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "6.6.6.6, unix:"}}, "10.0.0.1", SourceHidden},
		{"garbage behind a trusted hop: that hop", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "198.51.100.7, garbage, 10.0.0.2"}}, "10.0.0.2", SourceHidden},
		{"CF-Connecting-IP from trusted proxy", []ResolverOption{trusted, WithHeaders(HeaderCFConnectingIP)}, "10.0.0.1:80",
			[][2]string{{"Cf-Connecting-Ip", "198.51.100.7"}}, "198.51.100.7", SourceCFConnectingIP},
		{"Fastly-Client-IP from trusted proxy", []ResolverOption{trusted, WithHeaders(HeaderFastlyClientIP)}, "10.0.0.1:80",
			[][2]string{{"Fastly-Client-Ip", "198.51.100.7"}}, "198.51.100.7", SourceFastlyClientIP},
		{"X-Client-IP from trusted proxy", []ResolverOption{trusted, WithHeaders(HeaderXClientIP)}, "10.0.0.1:80",
			[][2]string{{"X-Client-Ip", "198.51.100.7"}}, "198.51.100.7", SourceXClientIP},
		{"CF-Connecting-IP not read unless configured", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"Cf-Connecting-Ip", "198.51.100.7"}}, "10.0.0.1", SourceProxyPeer},
		{"ports and brackets in XFF", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "[2001:db8::1]:443, 10.0.0.2:9000"}}, "2001:db8::1", SourceXForwardedFor},
		{"IPv4 with port", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "198.51.100.7:5555"}}, "198.51.100.7", SourceXForwardedFor},
		{"IPv4-mapped folded", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "::ffff:198.51.100.7"}}, "198.51.100.7", SourceXForwardedFor},
		{"mapped trusted peer", []ResolverOption{trusted}, "[::ffff:10.0.0.1]:80",
			[][2]string{{"X-Forwarded-For", "198.51.100.7"}}, "198.51.100.7", SourceXForwardedFor},
		{"zone stripped", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "fe80::1%eth0"}}, "fe80::1", SourceXForwardedFor},
		{"all hops trusted: the peer", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "10.0.0.5, 10.0.0.2"}}, "10.0.0.1", SourcePeer},
		{"only garbage: the peer", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "nope, , ;"}}, "10.0.0.1", SourceHidden},
		{"no header: the peer, a trusted proxy that named nobody", []ResolverOption{trusted}, "10.0.0.1:80", nil, "10.0.0.1", SourceProxyPeer},
		{"over the length cap: the peer", []ResolverOption{trusted, WithMaxHeaderBytes(16)}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "198.51.100.7, 10.0.0.2, 10.0.0.3, 10.0.0.4"}}, "10.0.0.1", SourcePeer},
		{"long client junk on the left is not read", []ResolverOption{trusted, WithMaxHeaderBytes(32)}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", strings.Repeat("1.1.1.1, ", 1000) + "198.51.100.7"}}, "198.51.100.7", SourceXForwardedFor},
		{"X-Real-IP not read unless configured", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"X-Real-Ip", "198.51.100.7"}}, "10.0.0.1", SourceProxyPeer},
		{"X-Real-IP from trusted proxy", []ResolverOption{trusted, WithHeaders(HeaderXRealIP)}, "10.0.0.1:80",
			[][2]string{{"X-Real-Ip", "198.51.100.7"}}, "198.51.100.7", SourceXRealIP},
		{"True-Client-IP from trusted proxy", []ResolverOption{trusted, WithHeaders(HeaderTrueClientIP)}, "10.0.0.1:80",
			[][2]string{{"True-Client-Ip", "2001:db8::5"}}, "2001:db8::5", SourceTrueClientIP},
		{"X-Real-IP garbage: the peer", []ResolverOption{trusted, WithHeaders(HeaderXRealIP)}, "10.0.0.1:80",
			[][2]string{{"X-Real-Ip", "1.2.3.4, 5.6.7.8"}}, "10.0.0.1", SourcePeer},
		{"XFF only configured: Forwarded ignored", []ResolverOption{trusted}, "10.0.0.1:80",
			[][2]string{{"Forwarded", "for=198.51.100.7"}}, "10.0.0.1", SourceProxyPeer},
		{"header preference order", []ResolverOption{trusted, WithHeaders(HeaderForwarded, HeaderXForwardedFor)}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "192.0.2.1"}, {"Forwarded", "for=198.51.100.7"}}, "198.51.100.7", SourceForwarded},
		{"falls through to next header", []ResolverOption{trusted, WithHeaders(HeaderForwarded, HeaderXForwardedFor)}, "10.0.0.1:80",
			[][2]string{{"X-Forwarded-For", "192.0.2.1"}, {"Forwarded", "for=10.0.0.9"}}, "192.0.2.1", SourceXForwardedFor},
		{"Forwarded simple", []ResolverOption{trusted, WithHeaders(HeaderForwarded)}, "10.0.0.1:80",
			[][2]string{{"Forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43"}}, "192.0.2.60", SourceForwarded},
		{"Forwarded quoted IPv6 with port", []ResolverOption{trusted, WithHeaders(HeaderForwarded)}, "10.0.0.1:80",
			[][2]string{{"Forwarded", `for="[2001:db8:cafe::17]:4711"`}}, "2001:db8:cafe::17", SourceForwarded},
		{"Forwarded case-insensitive name, spaces", []ResolverOption{trusted, WithHeaders(HeaderForwarded)}, "10.0.0.1:80",
			[][2]string{{"Forwarded", `For="192.0.2.43:47011" ; proto=https`}}, "192.0.2.43", SourceForwarded},
		{"Forwarded chain through trusted", []ResolverOption{trusted, WithHeaders(HeaderForwarded)}, "10.0.0.1:80",
			[][2]string{{"Forwarded", `for=1.2.3.4, for=192.0.2.43, for="[fd00::2]"`}}, "192.0.2.43", SourceForwarded},
		{"Forwarded instances merged", []ResolverOption{trusted, WithHeaders(HeaderForwarded)}, "10.0.0.1:80",
			[][2]string{{"Forwarded", `for=192.0.2.43`}, {"Forwarded", `for=10.1.1.1;by=10.0.0.1`}}, "192.0.2.43", SourceForwarded},
		{"Forwarded unknown: the reporting proxy", []ResolverOption{trusted, WithHeaders(HeaderForwarded)}, "10.0.0.1:80",
			[][2]string{{"Forwarded", `for=1.2.3.4, for=unknown, for=10.0.0.2`}}, "10.0.0.2", SourceHidden},
		{"Forwarded obfuscated: the peer", []ResolverOption{trusted, WithHeaders(HeaderForwarded)}, "10.0.0.1:80",
			[][2]string{{"Forwarded", `for=1.2.3.4, for="_hidden:_port"`}}, "10.0.0.1", SourceHidden},
		{"Forwarded element without for skipped", []ResolverOption{trusted, WithHeaders(HeaderForwarded)}, "10.0.0.1:80",
			[][2]string{{"Forwarded", `for=192.0.2.43, proto=https;by=10.0.0.1`}}, "192.0.2.43", SourceForwarded},
		{"Forwarded comma inside quotes", []ResolverOption{trusted, WithHeaders(HeaderForwarded)}, "10.0.0.1:80",
			[][2]string{{"Forwarded", `for=192.0.2.43;ext="a,b", for=10.0.0.3`}}, "192.0.2.43", SourceForwarded},
		{"Forwarded client's unbalanced quote cannot swallow proxy element", []ResolverOption{trusted, WithHeaders(HeaderForwarded)}, "10.0.0.1:80",
			[][2]string{{"Forwarded", `for="1.2.3.4, for=192.0.2.43`}}, "192.0.2.43", SourceForwarded},
		{"Forwarded duplicate for invalid", []ResolverOption{trusted, WithHeaders(HeaderForwarded)}, "10.0.0.1:80",
			[][2]string{{"Forwarded", `for=192.0.2.43, for=1.2.3.4;for=5.6.7.8`}}, "192.0.2.43", SourceForwarded},
		{"Forwarded unquoted bracket rejected IPv4 in brackets", []ResolverOption{trusted, WithHeaders(HeaderForwarded)}, "10.0.0.1:80",
			[][2]string{{"Forwarded", `for=192.0.2.43, for="[1.2.3.4]"`}}, "192.0.2.43", SourceForwarded},
		{"unparseable peer", nil, "@", nil, "invalid IP", SourceUnknown},
		{"IPv6 peer grouped", nil, "[2001:db8:1:2:3:4:5:6]:80", nil, "2001:db8:1:2:3:4:5:6", SourcePeer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mustResolver(t, c.opts...)
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = c.peer
			for _, h := range c.headers {
				req.Header.Add(h[0], h[1])
			}
			got := r.ClientIP(req)
			if got.Addr.String() != c.want || got.Source != c.source {
				t.Fatalf("got %v via %v, want %v via %v", got.Addr, got.Source, c.want, c.source)
			}
		})
	}
}

func TestResolverGroupingAndCGNAT(t *testing.T) {
	r := mustResolver(t, WithCGNAT(netip.MustParsePrefix("192.0.2.0/24")))
	cases := []struct {
		peer  string
		group string
		cgnat bool
	}{
		{"[2001:db8:1:2:3:4:5:6]:80", "2001:db8:1:2::/64", false},
		{"198.51.100.7:1", "198.51.100.7/32", false},
		{"100.64.3.4:1", "100.64.3.4/32", true},
		{"100.127.255.255:1", "100.127.255.255/32", true},
		{"100.128.0.1:1", "100.128.0.1/32", false},
		{"192.0.2.9:1", "192.0.2.9/32", true},
		{"[::ffff:100.64.0.1]:1", "100.64.0.1/32", true},
	}
	for _, c := range cases {
		got := r.Resolve(c.peer, nil)
		if got.Group.String() != c.group || got.CGNAT != c.cgnat {
			t.Errorf("%s: group %v cgnat %v, want %v %v", c.peer, got.Group, got.CGNAT, c.group, c.cgnat)
		}
	}
	r56 := mustResolver(t, WithIPv6PrefixBits(56), WithIPv4PrefixBits(24))
	if g := r56.Resolve("[2001:db8:1:2ff::1]:80", nil).Group.String(); g != "2001:db8:1:200::/56" {
		t.Errorf("/56 group %s", g)
	}
	if g := r56.Resolve("198.51.100.7:80", nil).Group.String(); g != "198.51.100.0/24" {
		t.Errorf("/24 group %s", g)
	}
}

func TestResolverOptionErrors(t *testing.T) {
	bad := []ResolverOption{
		WithTrustedProxies(netip.Prefix{}),
		WithCGNAT(netip.Prefix{}),
		WithHeaders(),
		WithHeaders(HeaderXForwardedFor, HeaderXForwardedFor),
		WithHeaders(Header(99)),
		WithIPv6PrefixBits(0),
		WithIPv6PrefixBits(129),
		WithIPv4PrefixBits(33),
		WithMaxHeaderBytes(0),
	}
	for i, o := range bad {
		if _, err := NewResolver(o); err == nil || !strings.HasPrefix(err.Error(), "fingerprint: ") {
			t.Errorf("option %d: err %v", i, err)
		}
	}
}

// TestVictimCannotBeDrained: an attacker who writes the victim's address
// into forwarding headers, directly or through the trusted proxy, spends
// only its own budget.
func TestVictimCannotBeDrained(t *testing.T) {
	r := mustResolver(t, WithTrustedProxies(proxyNet), WithHeaders(HeaderXForwardedFor, HeaderForwarded))
	const victim, attacker = "198.51.100.7", "203.0.113.66"
	spent := map[netip.Prefix]int{}
	attacks := []struct {
		peer string
		h    [2]string
	}{
		{attacker + ":5000", [2]string{"X-Forwarded-For", victim}},
		{attacker + ":5000", [2]string{"Forwarded", "for=" + victim}},
		{attacker + ":5000", [2]string{"X-Real-Ip", victim}},
		// Through the proxy, which appends the attacker's address.
		{"10.0.0.1:80", [2]string{"X-Forwarded-For", victim + ", " + attacker}},
		{"10.0.0.1:80", [2]string{"Forwarded", "for=" + victim + ", for=" + attacker}},
	}
	for range 100 {
		for _, a := range attacks {
			h := http.Header{}
			h.Add(a.h[0], a.h[1])
			spent[r.Resolve(a.peer, h).Group]++
		}
	}
	if n := spent[netip.MustParsePrefix(victim+"/32")]; n != 0 {
		t.Fatalf("victim's key charged %d times", n)
	}
	if n := spent[netip.MustParsePrefix(attacker+"/32")]; n != 500 {
		t.Fatalf("attacker's key charged %d times, want 500", n)
	}
}

func TestResolveAllocatesNothing(t *testing.T) {
	r := mustResolver(t, WithTrustedProxies(proxyNet), WithHeaders(HeaderForwarded, HeaderXForwardedFor))
	h := http.Header{}
	h.Add("X-Forwarded-For", "1.2.3.4, 198.51.100.7, 10.0.0.3, 10.0.0.2, 10.0.0.1")
	h.Add("Forwarded", `for="[2001:db8::1]:80", for=10.0.0.2`)
	h.Add("X-Forwarded-For", "fe80::1%eth0")
	var sink ClientIP
	if n := testing.AllocsPerRun(100, func() { sink = r.Resolve("10.0.0.1:80", h) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	if sink.Source != SourceForwarded {
		t.Fatal(sink)
	}
}

func TestSourceAndHeaderStrings(t *testing.T) {
	for s := SourceUnknown; s <= SourceHidden; s++ {
		if s.String() == "invalid" {
			t.Errorf("source %d has no name", s)
		}
	}
	if Source(200).String() != "invalid" || Header(0).String() != "invalid" {
		t.Error("out-of-range names")
	}
	if HeaderXRealIP.String() != http.CanonicalHeaderKey("x-real-ip") {
		t.Error(HeaderXRealIP.String())
	}
}
