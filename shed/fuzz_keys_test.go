package shed

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// FuzzMiddlewareKeys: whatever the path, method and header values, every
// spelling of one request (letters in another case, a trailing slash, a
// doubled leading slash, a dot segment, the method in another case) is one
// key per rule for one client, and no key holds the client's raw secret
// (an API key, a bearer token) or is longer than MaxCompositeKey.
func FuzzMiddlewareKeys(f *testing.F) {
	f.Add("/login", "POST", "sk_live_0123456789", "large")
	f.Add("/%6cogin/", "get", "tok-abcdefghijkl", "")
	f.Add("//a/./b/../c?x=1", "PROPFIND", "0123456789abcdef", "m|odel")
	f.Add("/%2525/x", "head", "secretsecretsecret", strings.Repeat("x", 100))
	st := &keyStore{Store: store.NewMemory()}
	c, err := New([]Rule{
		{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 1 << 30, Window: time.Hour},
		{Name: "key", Identity: APIKey, Algorithm: FixedWindow, Limit: 1 << 30, Window: time.Hour},
		{Name: "ip-route-model", Identity: Composite, Key: Key{"ip", "route", "header:X-Model"},
			Algorithm: FixedWindow, Limit: 1 << 30, Window: time.Hour},
		{Name: "key-auth", Identity: Composite, Key: Key{"api_key", "header:Authorization", "attr:plan"},
			Algorithm: FixedWindow, Limit: 1 << 30, Window: time.Hour},
	}, WithStore(st), quiet(), WithClient(func(r *http.Request) Client {
		return Client{APIKey: r.Header.Get("X-Api-Key"), Attributes: []Attribute{{Name: "plan", Value: "pro"}}}
	}))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })
	h := c.Middleware(http.HandlerFunc(ok))
	keysOf := func(method string, u *url.URL, secret, model string) []string {
		r := httptest.NewRequest("GET", "/", nil)
		r.Method, r.URL, r.RemoteAddr = method, u, "192.0.2.7:1234"
		r.Header.Set("X-Api-Key", secret)
		r.Header.Set("Authorization", "Bearer "+secret)
		r.Header.Set("X-Model", model)
		st.mu.Lock()
		st.keys = st.keys[:0]
		st.mu.Unlock()
		h.ServeHTTP(httptest.NewRecorder(), r)
		st.mu.Lock()
		defer st.mu.Unlock()
		return slices.Clone(st.keys)
	}
	f.Fuzz(func(t *testing.T, path, method, secret, model string) {
		u, err := url.ParseRequestURI(path)
		if err != nil || !strings.HasPrefix(u.EscapedPath(), "/") || method == "" || len(secret) < 12 {
			return
		}
		want := keysOf(method, u, secret, model)
		if len(want) != 4 {
			t.Fatalf("%d keys for 4 rules: %q", len(want), want)
		}
		lowSecret := strings.ToLower(secret)
		for _, k := range want {
			if len(k) > MaxCompositeKey {
				t.Errorf("key of %d bytes: %q", len(k), k)
			}
			if strings.Contains(strings.ToLower(k), lowSecret) && !strings.Contains(strings.ToLower(path+model), lowSecret) {
				t.Errorf("key %q holds the secret %q", k, secret)
			}
		}
		esc := u.EscapedPath()
		for _, v := range []struct{ method, path string }{
			{asciiUpper(method), esc},
			{method, asciiUpper(esc)},
			{method, esc + "/"},
			{method, "/" + esc},
			{method, "/." + esc},
		} {
			vu, err := url.ParseRequestURI(v.path)
			if err != nil {
				continue
			}
			if got := keysOf(v.method, vu, secret, model); !slices.Equal(got, want) {
				t.Errorf("%s %s: keys %q, but %s %s: %q", v.method, v.path, got, method, path, want)
			}
		}
	})
}

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
