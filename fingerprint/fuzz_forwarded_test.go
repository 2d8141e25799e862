package fingerprint

import (
	"net/http"
	"strings"
	"testing"
)

func fuzzResolve(t *testing.T, r *Resolver, name, value string) {
	h := http.Header{name: {value}}
	var got ClientIP
	// At most one allocation (a net/netip parse error) per entry.
	if n := testing.AllocsPerRun(1, func() { got = r.Resolve("10.0.0.1:80", h) }); n > float64(strings.Count(value, ",")+1) {
		t.Fatalf("%v allocations for %q", n, value)
	}
	switch got.Source {
	case SourcePeer, SourceHidden:
		if !containsAny(r.trusted, got.Addr) {
			t.Fatalf("%v from %q is not a trusted hop", got, value)
		}
	case SourceXForwardedFor, SourceForwarded:
		if containsAny(r.trusted, got.Addr) {
			t.Fatalf("trusted %v returned as client from %q", got.Addr, value)
		}
		if got.Addr != NormalizeAddr(got.Addr) || !got.Group.Contains(got.Addr) {
			t.Fatalf("unnormalised %v from %q", got, value)
		}
	default:
		t.Fatalf("source %v from %q", got.Source, value)
	}
}

func FuzzXForwardedFor(f *testing.F) {
	for _, s := range []string{
		"1.2.3.4", "1.2.3.4, 10.0.0.2", "[2001:db8::1]:443, 10.0.0.2:9000",
		"::ffff:1.2.3.4", "fe80::1%eth0", ",,,", "unknown, 1.2.3.4:99999",
		"[::1", "1.2.3.4%eth0", " \t1.2.3.4 \t",
	} {
		f.Add(s)
	}
	r, err := NewResolver(WithTrustedProxies(proxyNet, proxyNet6), WithMaxHeaderBytes(256))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v string) { fuzzResolve(t, r, "X-Forwarded-For", v) })
}

func FuzzForwarded(f *testing.F) {
	for _, s := range []string{
		"for=192.0.2.60;proto=http;by=203.0.113.43",
		`for="[2001:db8:cafe::17]:4711"`, `For="_hidden:_port", for=unknown`,
		`for=1.2.3.4, for="a,b;c", for="[fd00::1]"`, `for="\"x\\"`, `for=`, `;;=;`,
		`for="1.2.3.4, for=192.0.2.43`, `for=unknown:80`, `for="[::ffff:1.2.3.4%25en0]:_x"`,
	} {
		f.Add(s)
	}
	r, err := NewResolver(WithTrustedProxies(proxyNet, proxyNet6), WithHeaders(HeaderForwarded), WithMaxHeaderBytes(256))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v string) { fuzzResolve(t, r, "Forwarded", v) })
}

// FuzzParseNode checks that parseNode's IPv4 fast path answers every input
// as the general parser does.
func FuzzParseNode(f *testing.F) {
	for _, s := range []string{
		"1.2.3.4:80", "1.2.3.4", "255.255.255.255:65535", "01.2.3.4:1", "1.2.3.4:", "1.2.3.4:123456",
		"1.2.3.4.5", "256.1.1.1:1", "1.2.3:4", "0.0.0.0:0", "1.2.3.4%eth0", "[::1]:80", "::ffff:1.2.3.4",
		"1.2.3.4:80:90", "1.2.3.0004:1", "", ":80",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseNode(s)
		b, okb := parseNodeGeneral(s)
		if a != b || ok != okb {
			t.Fatalf("parseNode(%q) = %v, %v; the general parser says %v, %v", s, a, ok, b, okb)
		}
	})
}
