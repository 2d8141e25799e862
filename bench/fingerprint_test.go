package bench

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/fingerprint"
)

// BenchmarkClientIP: the client address of a request that crossed five
// proxies (two trusted) with a client-written entry on the left, as sluice
// resolves it and as a hand-rolled stdlib resolver (split, net.ParseIP,
// right-most untrusted) does.
func BenchmarkClientIP(b *testing.B) {
	const xff = "6.6.6.6, 198.51.100.7, 192.0.2.10, 10.0.0.3, 10.0.0.2"
	const peer = "10.0.0.1:443"
	h := http.Header{}
	h.Set("X-Forwarded-For", xff)
	trusted := netip.MustParsePrefix("10.0.0.0/8")
	r, err := fingerprint.NewResolver(fingerprint.WithTrustedProxies(trusted))
	if err != nil {
		b.Fatal(err)
	}
	_, trustedNet, _ := net.ParseCIDR("10.0.0.0/8")
	stdlib := func() string {
		host, _, err := net.SplitHostPort(peer)
		if err != nil || !trustedNet.Contains(net.ParseIP(host)) {
			return host
		}
		parts := strings.Split(h.Get("X-Forwarded-For"), ",")
		for i := len(parts) - 1; i >= 0; i-- {
			ip := net.ParseIP(strings.TrimSpace(parts[i]))
			if ip != nil && !trustedNet.Contains(ip) {
				return ip.String()
			}
		}
		return host
	}
	if got := r.Resolve(peer, h).Addr.String(); got != "192.0.2.10" || stdlib() != got {
		b.Fatalf("inputs disagree: sluice %s, stdlib %s", got, stdlib())
	}
	b.Run("sluice", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r.Resolve(peer, h).Source != fingerprint.SourceXForwardedFor {
				b.Fatal("wrong source")
			}
		}
	})
	b.Run("stdlib", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if stdlib() == "" {
				b.Fatal("no address")
			}
		}
	})
}

// BenchmarkRouteNormalize: the route key of a messy path, as sluice
// normalises it into a reused buffer and as lower-casing, unescaping and
// path.Clean do.
func BenchmarkRouteNormalize(b *testing.B) {
	const raw = "//API/v1/./Users/%34%32/../42/Orders/?page=2"
	const want = "/api/v1/users/42/orders"
	stdlib := func() string {
		p, _, _ := strings.Cut(raw, "?")
		u, err := url.PathUnescape(p)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(path.Clean("/"+strings.ToLower(u)), "/")
	}
	if got := fingerprint.NormalizePath(raw); got != want || stdlib() != want {
		b.Fatalf("inputs disagree: sluice %s, stdlib %s", got, stdlib())
	}
	b.Run("sluice", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 64)
		for b.Loop() {
			buf = fingerprint.AppendNormalizedPath(buf[:0], raw)
		}
		if string(buf) != want {
			b.Fatal(string(buf))
		}
	})
	b.Run("stdlib", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if stdlib() != want {
				b.Fatal("mismatch")
			}
		}
	})
}
