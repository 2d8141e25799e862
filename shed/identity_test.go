package shed

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/store"
)

// TestCompositeTenantAndModel: a rule keyed on tenant + model counts each
// pair apart, without the model stuffed into Tenant; a request without a
// tenant is not counted by it; one without a model counts on the empty
// model, so leaving it out does not escape the rule.
func TestCompositeTenantAndModel(t *testing.T) {
	c, _, _ := newTest(t, []Rule{{Name: "tenant-model", Identity: Composite, Key: Key{"tenant", "attr:model"},
		Algorithm: FixedWindow, Limit: 2, Window: time.Hour}})
	model := func(m string) []Attribute { return []Attribute{{Name: "model", Value: m}} }
	for i := range 2 {
		if d := decide(t, c, Attempt{Tenant: "acme", Attributes: model("large")}); !d.Allowed {
			t.Fatalf("acme/large #%d: %+v", i+1, d)
		}
	}
	if d := decide(t, c, Attempt{Tenant: "acme", Attributes: model("large")}); d.Allowed || d.Rule != "tenant-model" {
		t.Fatalf("acme/large #3: %+v, want a rejection", d)
	}
	for _, a := range []Attempt{
		{Tenant: "acme", Attributes: model("small")},
		{Tenant: "other", Attributes: model("large")},
		{Tenant: "acme"}, {Tenant: "acme"}, // the empty model: its own key, limited
	} {
		if d := decide(t, c, a); !d.Allowed {
			t.Fatalf("%+v: %+v, want admitted", a, d)
		}
	}
	if d := decide(t, c, Attempt{Tenant: "acme"}); d.Allowed {
		t.Fatal("acme without a model: admitted a third time, so omitting the model escapes the rule")
	}
	for range 5 { // no tenant: the rule does not apply
		if d := decide(t, c, Attempt{Attributes: model("large")}); !d.Allowed {
			t.Fatalf("no tenant: %+v", d)
		}
	}
	// Decide's callers may name the whole part.
	if d := decide(t, c, Attempt{Tenant: "acme", Attributes: []Attribute{{Name: "attr:model", Value: "large"}}}); d.Allowed {
		t.Fatal(`"attr:model" is another key than "model"`)
	}
}

// TestCompositeIPAndRouteShareOneKeyPerSpelling: a rule keyed on IP +
// route counts every spelling of a route on one key (case, trailing and
// doubled slashes, dot segments, escapes), and routes and clients apart.
func TestCompositeIPAndRouteShareOneKeyPerSpelling(t *testing.T) {
	st := &keyStore{Store: store.NewMemory()}
	_, h, _ := newTest(t, []Rule{{Name: "ip-route", Identity: Composite, Key: Key{"ip", "route"},
		Algorithm: FixedWindow, Limit: 1, Window: time.Hour}}, WithStore(st))
	path := func(p string) func(*http.Request) {
		return func(r *http.Request) { r.URL = httptest.NewRequest("GET", p, nil).URL }
	}
	if w := send(h, "192.0.2.1", path("/login")); w.Code != http.StatusOK {
		t.Fatalf("first /login: %d", w.Code)
	}
	for _, p := range []string{"/login/", "/Login", "//login", "/./login", "/%6cogin", "/a/../login", "/LOGIN?x=1"} {
		if w := send(h, "192.0.2.1", path(p)); w.Code != http.StatusTooManyRequests {
			t.Errorf("%s after /login: %d, want 429 (one key)", p, w.Code)
		}
	}
	if w := send(h, "192.0.2.1", path("/other")); w.Code != http.StatusOK {
		t.Errorf("/other: %d", w.Code)
	}
	if w := send(h, "192.0.2.2", path("/login")); w.Code != http.StatusOK {
		t.Errorf("another client's /login: %d", w.Code)
	}
	want := map[string]bool{"c:192.0.2.1|/login": true, "c:192.0.2.1|/other": true, "c:192.0.2.2|/login": true}
	for _, k := range st.keys {
		if !want[k] {
			t.Errorf("store key %q", k)
		}
	}
}

// TestCompositeRouteIsThePatternOfOneRoute: under a ServeMux the route
// part is the pattern that matched, so /items/1 and /items/2 are one key;
// under a subtree pattern it is the path.
func TestCompositeRouteIsThePatternOfOneRoute(t *testing.T) {
	st := &keyStore{Store: store.NewMemory()}
	c, _, _ := newTest(t, []Rule{{Name: "route", Identity: Composite, Key: Key{"route"},
		Algorithm: FixedWindow, Limit: 10, Window: time.Hour}}, WithStore(st))
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", c.Middleware(http.HandlerFunc(ok)))
	mux.Handle("/api/", c.Middleware(http.HandlerFunc(ok)))
	for _, target := range []string{"/items/1", "/items/2", "/api/Users/7/"} {
		r := httptest.NewRequest("GET", target, nil)
		mux.ServeHTTP(httptest.NewRecorder(), r)
	}
	got := strings.Join(st.keys, " ")
	if got != "c:GET /items/{id} c:GET /items/{id} c:/api/users/7" {
		t.Errorf("keys %q", got)
	}
}

// TestCompositeHeaderIsHashedAndValuesBounded: a header part never puts
// the header's value in a store key (it may be a credential), nor an API
// key part the key; a long attribute is hashed, so every key is at most
// MaxCompositeKey bytes; two long values differing at their end stay two
// keys.
func TestCompositeHeaderIsHashedAndValuesBounded(t *testing.T) {
	st := &keyStore{Store: store.NewMemory()}
	c, h, _ := newTest(t, []Rule{
		{Name: "hdr", Identity: Composite, Key: Key{"ip", "header:authorization"}, Algorithm: FixedWindow, Limit: 1, Window: time.Hour},
		{Name: "long", Identity: Composite, Key: Key{"api_key", "user", "attr:device", "ja4"}, Algorithm: FixedWindow, Limit: 1, Window: time.Hour},
	}, WithStore(st), WithClient(func(r *http.Request) Client {
		return Client{APIKey: "sk_live_SECRET", User: strings.Repeat("u", 200) + r.URL.Query().Get("u"),
			Attributes: []Attribute{{Name: "device", Value: "dev|ice"}}}
	}))
	bearer := func(v string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", v) }
	}
	if w := send(h, "192.0.2.1", bearer("Bearer SECRET-TOKEN")); w.Code != http.StatusOK {
		t.Fatalf("first: %d", w.Code)
	}
	if w := send(h, "192.0.2.1", bearer("Bearer SECRET-TOKEN")); w.Code != http.StatusTooManyRequests {
		t.Fatalf("the same header again: %d, want 429", w.Code)
	}
	if w := send(h, "192.0.2.1", bearer("Bearer OTHER"), func(r *http.Request) { r.URL.RawQuery = "u=x" }); w.Code != http.StatusOK {
		t.Fatalf("another header and user: %d, want 200", w.Code)
	}
	for _, k := range st.keys {
		if strings.Contains(k, "SECRET") || strings.Contains(k, "sk_live") || strings.Contains(k, "OTHER") || strings.Contains(k, "dev|ice") {
			t.Errorf("store key %q holds a raw value", k)
		}
		if len(k) > MaxCompositeKey {
			t.Errorf("store key of %d bytes, above MaxCompositeKey %d", len(k), MaxCompositeKey)
		}
	}
	_ = c
}

// TestCompositeValidation: a Key must be a Composite rule's, of known,
// distinct, contiguous parts.
func TestCompositeValidation(t *testing.T) {
	base := Rule{Name: "r", Identity: Composite, Algorithm: FixedWindow, Limit: 1, Window: time.Hour}
	for _, tc := range []struct {
		key  Key
		id   Identity
		want string
	}{
		{Key{}, Composite, "at least one part"},
		{Key{"tenant", "", "route"}, Composite, "empty"},
		{Key{"route", "route"}, Composite, "repeated"},
		{Key{"model"}, Composite, "unknown key part"},
		{Key{"header:"}, Composite, "not a header name"},
		{Key{"header:X Model"}, Composite, "not a header name"},
		{Key{"attr:"}, Composite, "attribute name"},
		{Key{"attr:a|b"}, Composite, "attribute name"},
		{Key{"route"}, IP, "applies only to composite"},
	} {
		r := base
		r.Key, r.Identity = tc.key, tc.id
		if _, err := New([]Rule{r}, quiet()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("key %q as %v: %v, want %q", tc.key, tc.id, err, tc.want)
		}
	}
	if _, err := New([]Rule{base}, WithPenalties(&fakePenalties{}, Composite), quiet()); err == nil {
		t.Error("penalties keyed on Composite were accepted")
	}
}

// TestCompositeOverride: an override names a composite key by its parts'
// values, "|" between them, and scales that pair alone.
func TestCompositeOverride(t *testing.T) {
	c, _, clk := newTest(t, []Rule{{Name: "tm", Identity: Composite, Key: Key{"tenant", "attr:model"},
		Algorithm: FixedWindow, Limit: 1, Window: time.Hour}})
	_ = clk
	if err := c.SetOverrides([]Override{{Rule: "tm", Key: "acme|large", Factor: 3, Until: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	admitted := func(tenant, model string) (n int) {
		for range 5 {
			if decide(t, c, Attempt{Tenant: tenant, Attributes: []Attribute{{Name: "model", Value: model}}}).Allowed {
				n++
			}
		}
		return n
	}
	if n := admitted("acme", "large"); n != 3 {
		t.Errorf("acme/large with a 3x override: %d admitted, want 3", n)
	}
	if n := admitted("acme", "small"); n != 1 {
		t.Errorf("acme/small: %d admitted, want 1", n)
	}
	if err := c.SetOverrides([]Override{{Rule: "tm", Key: "acme", Factor: 3, Until: time.Now().Add(time.Hour)}}); err == nil {
		t.Error("an override of one value for a key of two parts was accepted")
	}
	// ResetKey names the key the same way.
	if err := c.ResetKey(context.Background(), "tm", "acme|small"); err != nil {
		t.Fatal(err)
	}
	if n := admitted("acme", "small"); n != 1 {
		t.Errorf("acme/small after ResetKey: %d admitted, want 1 again", n)
	}
}

// TestCompositeJA4KeysOnTheHandshake: over real TLS with JA4 capture, a
// rule keyed on the JA4 counts every connection of one client stack on one
// key, whatever its address, and another stack on another.
func TestCompositeJA4KeysOnTheHandshake(t *testing.T) {
	c, err := New([]Rule{{Name: "ja4", Identity: Composite, Key: Key{"ja4"}, Algorithm: FixedWindow, Limit: 1, Window: time.Hour}}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewUnstartedServer(c.Middleware(http.HandlerFunc(ok)))
	srv.Config.ConnContext = fingerprint.ConnContext
	if srv.TLS, err = fingerprint.CaptureTLS(&tls.Config{}); err != nil { // StartTLS adds the certificate
		t.Fatal(err)
	}
	srv.StartTLS()
	defer srv.Close()
	get := func(maxVersion uint16) int {
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.MaxVersion = maxVersion
		tr.DisableKeepAlives = true
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(tls.VersionTLS13); got != http.StatusOK {
		t.Fatalf("first connection: %d", got)
	}
	if got := get(tls.VersionTLS13); got != http.StatusTooManyRequests {
		t.Fatalf("a second connection of the same stack: %d, want 429", got)
	}
	if got := get(tls.VersionTLS12); got != http.StatusOK {
		t.Fatalf("another stack (TLS 1.2 at most): %d, want 200", got)
	}
}
