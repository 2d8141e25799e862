package shed

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// TestResponseOverrides: WithHeaders and WithRejection replace the
// response; the defaults stay callable from them.
func TestResponseOverrides(t *testing.T) {
	_, h, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: time.Hour}},
		WithHeaders(func(h http.Header, d Decision) {
			d.WriteHeaders(h)
			h.Set("X-Decided-By", d.Rule)
		}),
		WithRejection(func(w http.ResponseWriter, r *http.Request, d Decision) {
			w.WriteHeader(http.StatusTeapot)
		}))
	if w := send(h, "192.0.2.1"); w.Code != 200 || w.Header().Get("X-Decided-By") != "ip" || w.Header().Get("RateLimit") == "" {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
	if w := send(h, "192.0.2.1"); w.Code != http.StatusTeapot || w.Header().Get("Retry-After") == "" {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
}

// TestTrustedProxy: behind a configured proxy, the forwarded client is
// the key; the proxy's own address is not.
func TestTrustedProxy(t *testing.T) {
	res, err := fingerprint.NewResolver(fingerprint.WithTrustedProxies(netip.MustParsePrefix("10.0.0.0/8")))
	if err != nil {
		t.Fatal(err)
	}
	_, h, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: time.Hour}},
		WithResolver(res))
	xff := func(v string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("X-Forwarded-For", v) }
	}
	for _, client := range []string{"198.51.100.1", "198.51.100.2"} {
		if w := send(h, "10.0.0.1", xff(client)); w.Code != http.StatusOK {
			t.Fatalf("%s: %d", client, w.Code)
		}
	}
	if w := send(h, "10.0.0.1", xff("203.0.113.9, 198.51.100.1")); w.Code != http.StatusTooManyRequests {
		t.Fatalf("the right-most untrusted entry is the client: %d", w.Code)
	}
}

// TestAdaptiveWait: an adaptive rule with a max wait queues the attempt
// until a permit comes back, and sheds it when the wait runs out.
func TestAdaptiveWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New([]Rule{{Name: "adaptive", Algorithm: Adaptive, Limiter: aimdLimiter(t, 1, 1), MaxWait: time.Second}}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_, tok1, _ := c.Decide(ctx, Attempt{})
		done := make(chan Decision)
		go func() {
			d, tok, _ := c.Decide(ctx, Attempt{})
			tok.Done(Success)
			done <- d
		}()
		synctest.Wait()
		tok1.Done(Success)
		if d := <-done; !d.Allowed {
			t.Fatalf("waiter: %+v", d)
		}
		_, tok3, _ := c.Decide(ctx, Attempt{})
		start := time.Now()
		if d, _, _ := c.Decide(ctx, Attempt{}); d.Allowed || d.Kind != Shedding || time.Since(start) != time.Second {
			t.Fatalf("%+v after %v", d, time.Since(start))
		}
		tok3.Done(Success)
		if s := c.Stats(); s.Inflight != 0 || s.Rules[0].Inflight != 0 || s.QueueWaits != 2 || s.QueueShed != 1 {
			t.Fatalf("%+v", s)
		}
	})
}

// TestHeaderFields: WithHeaderFields selects the draft or the legacy
// fields; Retry-After comes either way.
func TestHeaderFields(t *testing.T) {
	rules := []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: time.Hour}}
	for _, tc := range []struct {
		f             HeaderFields
		draft, legacy bool
	}{{DraftFields, true, false}, {LegacyFields, false, true}, {AllFields, true, true}} {
		_, h, _ := newTest(t, rules, WithHeaderFields(tc.f))
		for i := range 2 {
			w := send(h, "192.0.2.1")
			hd := w.Header()
			if (hd.Get("RateLimit") != "") != tc.draft || (hd.Get("RateLimit-Policy") != "") != tc.draft ||
				(hd.Get("X-RateLimit-Remaining") != "") != tc.legacy || (hd.Get("X-RateLimit-Reset") != "") != tc.legacy ||
				(hd.Get("X-RateLimit-Limit") != "") != tc.legacy || (hd.Get("Retry-After") != "") != (i == 1) {
				t.Fatalf("fields %d, request %d: %v", tc.f, i, hd)
			}
		}
	}
	for _, f := range []HeaderFields{0, 4, AllFields | 8} {
		if _, err := New(rules, WithHeaderFields(f)); err == nil {
			t.Errorf("fields %d accepted", f)
		}
	}
}

// TestWrappedWriter: the handler's writer records the status, unwraps to
// the original and passes Flush and Hijack on (Hijack fails where the
// original cannot).
func TestWrappedWriter(t *testing.T) {
	c, err := New([]Rule{{Name: "cap", Algorithm: Concurrency, Limit: 1}}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	var checked bool
	h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, err := w.(http.Hijacker).Hijack(); err == nil {
			t.Error("hijacked a ResponseRecorder")
		}
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Error(err)
		}
		checked = true
	}))
	w := send(h, "192.0.2.1")
	if !checked || w.Code != http.StatusOK || !w.Flushed {
		t.Fatalf("%v %d %v", checked, w.Code, w.Flushed)
	}
}

// keyStore records the keys of the hits it decides.
type keyStore struct {
	store.Store
	mu   sync.Mutex
	keys []string
}

func (s *keyStore) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	s.mu.Lock()
	for _, h := range req.Hits[:req.N] {
		s.keys = append(s.keys, strings.Clone(h.Key))
	}
	s.mu.Unlock()
	return s.Store.Decide(ctx, req, res)
}

// TestAPIKeyHashed: a raw API key never reaches the store; its keyed hash
// does, the same for the same key, different for another.
func TestAPIKeyHashed(t *testing.T) {
	st := &keyStore{Store: store.NewMemory()}
	_, h, _ := newTest(t, []Rule{
		{Name: "key", Identity: APIKey, Algorithm: SlidingLog, Limit: 10, Window: time.Hour},
		{Name: "tenant", Identity: Tenant, Algorithm: SlidingLog, Limit: 10, Window: time.Hour},
	}, WithStore(st), WithClient(func(r *http.Request) Client {
		return Client{APIKey: r.Header.Get("X-Api-Key"), Tenant: "acme"}
	}))
	for _, k := range []string{"sk_live_aaaaaaaaaaaaaaaa", "sk_live_aaaaaaaaaaaaaaaa", "sk_live_bbbbbbbbbbbbbbbb"} {
		send(h, "192.0.2.1", func(r *http.Request) { r.Header.Set("X-Api-Key", k) })
	}
	want := []string{"key:", "tenant:acme", "key:", "tenant:acme", "key:", "tenant:acme"}
	if len(st.keys) != len(want) {
		t.Fatalf("keys %q", st.keys)
	}
	for i, k := range st.keys {
		if strings.Contains(k, "sk_live") || !strings.HasPrefix(k, want[i]) {
			t.Fatalf("key %d: %q", i, k)
		}
	}
	if st.keys[0] != st.keys[2] || st.keys[0] == st.keys[4] || len(st.keys[0]) != len("key:")+fingerprint.SumLen {
		t.Fatalf("keys %q", st.keys)
	}
}

// TestOverrideErrorsNeverShowTheRawKey: an override SetOverrides rejects is
// named by its index and rule, never by a raw API key, on every error path
// (a bad factor, a key given twice, a scale the store cannot hold).
func TestOverrideErrorsNeverShowTheRawKey(t *testing.T) {
	const secret = "sk_live_do_not_print_me"
	c, err := New([]Rule{
		{Name: "daily", Identity: Tenant, Algorithm: FixedWindow, Limit: 3, Window: 24 * time.Hour},
		{Name: "burst", Identity: APIKey, Algorithm: TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Hour)},
	}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	until := time.Now().Add(time.Hour)
	ok := Override{Rule: "daily", Key: "acme", Factor: 2, Until: until}
	for _, tc := range []struct {
		name string
		list []Override
		want string
	}{
		{"factor", []Override{ok, {Rule: "burst", Key: secret, Factor: nan(), Until: until}},
			`shed: overrides[1] (rule "burst"): factor must be positive and finite`},
		{"twice", []Override{{Rule: "burst", Key: secret, Factor: 2, Until: until}, ok, {Rule: "burst", Key: secret, Factor: 3, Until: until}},
			`shed: overrides[2] (rule "burst"): the key of overrides[0] is given again`},
		{"scale", []Override{{Rule: "burst", Key: secret, Factor: 1e300, Until: until}},
			`shed: overrides[0] (rule "burst"): scaled limit`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.SetOverrides(tc.list)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "do_not_print") {
				t.Fatalf("the raw key is in the error: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			var oe *OverrideError
			if !errors.As(err, &oe) || oe.Rule != "burst" || oe.Index != len(tc.list)-1 || (oe.First >= 0) != (tc.name == "twice") {
				t.Fatalf("error %v: OverrideError %+v", err, oe)
			}
		})
	}
}

// TestOverrideExpiredNeverCollides: an expired override of a key does not
// make a live one of the same key a repeat, in either order.
func TestOverrideExpiredNeverCollides(t *testing.T) {
	c, err := New([]Rule{{Name: "daily", Identity: Tenant, Algorithm: FixedWindow, Limit: 3, Window: 24 * time.Hour}}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	live := Override{Rule: "daily", Key: "acme", Factor: 2, Until: time.Now().Add(time.Hour)}
	old := Override{Rule: "daily", Key: "acme", Factor: 10, Until: time.Now().Add(-time.Hour)}
	for _, list := range [][]Override{{old, live}, {live, old}} {
		if err := c.SetOverrides(list); err != nil {
			t.Errorf("%v: %v", list, err)
		}
	}
	if err := c.SetOverrides([]Override{live, live}); err == nil || !strings.Contains(err.Error(), "overrides[0] is given again") {
		t.Errorf("a live repeat: %v", err)
	}
}

// TestIPOverrideKeyMatchesTheMiddlewareKey: an IP override's key is
// normalised as the middleware normalises a client (IPv4-mapped folded to
// IPv4, zone dropped, grouped by the resolver's prefix), so that it applies
// to the requests it names; what cannot be an address is rejected.
func TestIPOverrideKeyMatchesTheMiddlewareKey(t *testing.T) {
	v6in56, err := fingerprint.NewResolver(fingerprint.WithIPv6PrefixBits(56), fingerprint.WithIPv4PrefixBits(24))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key, peer string
		res             *fingerprint.Resolver
	}{
		{"v4", "192.0.2.1", "192.0.2.1:40000", nil},
		{"v6 host in its /64", "2001:db8:0:1::1", "[2001:db8:0:1:aaaa::5]:40000", nil},
		{"v6 spelled long", "2001:0db8:0000:0001:0000:0000:0000:0001", "[2001:db8:0:1::9]:40000", nil},
		{"v4-mapped", "::ffff:192.0.2.1", "192.0.2.1:40000", nil},
		{"peer v4-mapped", "192.0.2.1", "[::ffff:192.0.2.1]:40000", nil},
		{"zoned", "fe80::1%eth0", "[fe80::1%eth0]:40000", nil},
		{"zoned peer, bare key", "fe80::2", "[fe80::1%eth1]:40000", nil},
		{"v6 /56 resolver", "2001:db8:0:1::1", "[2001:db8:0:ff::1]:40000", v6in56},
		{"v4 /24 resolver", "192.0.2.200", "192.0.2.1:40000", v6in56},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []Option{}
			if tc.res != nil {
				opts = append(opts, WithResolver(tc.res))
			}
			c, h, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: time.Hour}}, opts...)
			if err := c.SetOverrides([]Override{{Rule: "ip", Key: tc.key, Factor: 3, Until: time.Now().Add(time.Hour)}}); err != nil {
				t.Fatal(err)
			}
			ok := 0
			for range 5 {
				if w := send(h, "", func(r *http.Request) { r.RemoteAddr = tc.peer }); w.Code == http.StatusOK {
					ok++
				}
			}
			if ok != 3 {
				t.Fatalf("override %q: %s admitted %d, want 3", tc.key, tc.peer, ok)
			}
		})
	}
	c, _, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: time.Hour}})
	until := time.Now().Add(time.Hour)
	for _, key := range []string{"not-an-ip", "192.0.2.1:80", "[2001:db8::1]", "2001:db8::/64", "1.2.3", " 192.0.2.1", "192.0.2.1%eth0"} {
		err := c.SetOverrides([]Override{{Rule: "ip", Key: key, Factor: 2, Until: until}})
		if err == nil || !strings.Contains(err.Error(), `shed: overrides[0] (rule "ip"): key is not an IP address`) {
			t.Errorf("key %q: %v", key, err)
		}
	}
	// Two spellings of one group are one key given twice.
	err = c.SetOverrides([]Override{{Rule: "ip", Key: "2001:db8::1", Factor: 2, Until: until}, {Rule: "ip", Key: "2001:db8::2%eth0", Factor: 3, Until: until}})
	if err == nil || !strings.Contains(err.Error(), "overrides[1] (rule \"ip\"): the key of overrides[0] is given again") {
		t.Errorf("one /64 twice: %v", err)
	}
}
