package fingerprint_test

import (
	"fmt"
	"net/http/httptest"
	"net/netip"

	"github.com/sluicehq/sluice/fingerprint"
)

func Example() {
	// The load balancer lives in 10.0.0.0/8 and appends to X-Forwarded-For.
	resolver, err := fingerprint.NewResolver(
		fingerprint.WithTrustedProxies(netip.MustParsePrefix("10.0.0.0/8")))
	if err != nil {
		panic(err)
	}
	login, err := fingerprint.NewCategory("login")
	if err != nil {
		panic(err)
	}

	// A client that talks to us directly cannot pick its own identity.
	direct := httptest.NewRequest("POST", "/LOGIN/?next=/", nil)
	direct.RemoteAddr = "203.0.113.9:51000"
	direct.Header.Set("X-Forwarded-For", "198.51.100.7")
	ip := resolver.ClientIP(direct)
	fmt.Println(ip.Addr, ip.Source)

	// Through the balancer, the entry it appended is the client; the left
	// part, written by the client, is ignored.
	proxied := httptest.NewRequest("POST", "//login", nil)
	proxied.RemoteAddr = "10.0.0.1:443"
	proxied.Header.Set("X-Forwarded-For", "198.51.100.7, 2001:db8:0:1::99")
	ip = resolver.ClientIP(proxied)
	fmt.Println(ip.Addr, ip.Source)

	key := login.AppendIP(nil, ip)
	fmt.Println(string(key))
	fmt.Println(string(fingerprint.AppendRoute(nil, direct)), string(fingerprint.AppendRoute(nil, proxied)),
		fingerprint.ClassOf(direct.Method))
	// Output:
	// 203.0.113.9 peer
	// 2001:db8:0:1::99 x-forwarded-for
	// rl:login:ip:2001:db8:0:1::/64
	// /login /login write
}
