package fingerprint

import (
	"strings"
	"testing"
)

func TestCategoryKeys(t *testing.T) {
	c, err := NewCategory("login")
	if err != nil {
		t.Fatal(err)
	}
	h, _ := NewHasher(WithSecret([]byte("0123456789abcdef")))
	r := mustResolver(t)
	v4 := r.Resolve("198.51.100.7:1", nil)
	v6 := r.Resolve("[2001:db8::1]:1", nil)
	cases := []struct{ got, want string }{
		{string(c.AppendIP(nil, v4)), "rl:login:ip:198.51.100.7/32"},
		{string(c.AppendIP(nil, v6)), "rl:login:ip:2001:db8::/64"},
		{string(c.AppendIP(nil, ClientIP{})), "rl:login:ip:invalid"},
		{string(c.AppendUser(nil, "u42")), "rl:login:user:u42"},
		{string(c.AppendTenant(nil, "acme")), "rl:login:tenant:acme"},
		{string(c.AppendAPIKey(nil, h, "sk_live_secret")), "rl:login:key:" + h.Sum("sk_live_secret")},
		{c.Name(), "login"},
		{Category{}.Name(), ""},
	}
	for _, cs := range cases {
		if cs.got != cs.want {
			t.Errorf("got %q, want %q", cs.got, cs.want)
		}
	}
	if strings.Contains(string(c.AppendAPIKey(nil, h, "sk_live_secret")), "secret") {
		t.Error("raw API key in store key")
	}
}

func TestCategoryValidation(t *testing.T) {
	for _, bad := range []string{"", "a:b", "Login", "a b", strings.Repeat("a", 65), "é"} {
		if _, err := NewCategory(bad); err == nil || !strings.HasPrefix(err.Error(), "fingerprint: ") {
			t.Errorf("NewCategory(%q): %v", bad, err)
		}
	}
	for _, good := range []string{"a", "api.v2", "search-heavy", "x_1"} {
		if _, err := NewCategory(good); err != nil {
			t.Errorf("NewCategory(%q): %v", good, err)
		}
	}
}

func TestCategoryAppendAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	c, _ := NewCategory("api")
	h, _ := NewHasher()
	ip := mustResolver(t).Resolve("[2001:db8::1]:1", nil)
	buf := make([]byte, 0, 128)
	c.AppendAPIKey(buf, h, "warm")
	n := testing.AllocsPerRun(100, func() {
		buf = c.AppendIP(buf[:0], ip)
		buf = c.AppendUser(buf[:0], "user-1")
		buf = c.AppendAPIKey(buf[:0], h, "sk_test_123")
	})
	if n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
