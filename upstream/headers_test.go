package upstream

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

func TestTransportRetryAfterParse(t *testing.T) {
	date := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"3", 3 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{"Mon, 30 Nov 2026 12:00:07 GMT", 7 * time.Second, true},
		{"Monday, 30-Nov-26 12:00:07 GMT", 7 * time.Second, true}, // RFC 850
		{"Mon Nov 30 12:00:07 2026", 7 * time.Second, true},       // asctime
		{"Mon, 30 Nov 2026 11:00:00 GMT", 0, true},                // in the past
		{"99999999999999999999", maxSeconds * time.Second, true},
		{"", 0, false},
		{"-1", 0, false},
		{"+3", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	} {
		got, ok := parseRetryAfter(tc.in, date)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestTransportQuotasParse(t *testing.T) {
	date := time.Unix(1_800_000_000, 0)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name string
		h    http.Header
		want []quota
	}{
		{"x-ratelimit delta", h("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "7", "X-RateLimit-Reset", "30"),
			[]quota{{remaining: 7, limit: 100, reset: 30 * time.Second}}},
		{"x-ratelimit unix time", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1800000060"),
			[]quota{{remaining: 0, reset: 61 * time.Second}}},
		{"x-ratelimit no reset", h("X-RateLimit-Remaining", "7"), nil},
		{"x-ratelimit bad", h("X-RateLimit-Remaining", "-7", "X-RateLimit-Reset", "1"), nil},
		{"ietf", h("RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`,
			"RateLimit", `"burst";r=50;t=30, "daily";r=999;t=3600`),
			[]quota{{"burst", 50, 100, 30 * time.Second}, {"daily", 999, 1000, time.Hour}}},
		{"ietf token names, repeated field lines", h("RateLimit", `burst;r=5;t=1`, "RateLimit", `day;r=9;t=9;pk=:cGsx:`),
			[]quota{{"burst", 5, 0, time.Second}, {"day", 9, 0, 9 * time.Second}}},
		{"ietf beats x-ratelimit", h("RateLimit", `"a";r=1;t=2`, "X-RateLimit-Remaining", "9", "X-RateLimit-Reset", "9"),
			[]quota{{"a", 1, 0, 2 * time.Second}}},
		{"ietf invalid falls back", h("RateLimit", `"a";r=1;t=2,`, "X-RateLimit-Remaining", "9", "X-RateLimit-Reset", "9"),
			[]quota{{"", 9, 0, 9 * time.Second}}},
		{"ietf item without t skipped", h("RateLimit", `"a";r=1, "b";r=2;t=3`),
			[]quota{{"b", 2, 0, 3 * time.Second}}},
		{"ietf decimal rejected", h("RateLimit", `"a";r=1.5;t=2`), nil},
		{"ietf other shapes ignored", h("RateLimit", `"a";r=1;t=2, (1 2)`, "RateLimit", `"b";r=1;t=2;d=@1`,
			"X-RateLimit-Remaining", "9", "X-RateLimit-Reset", "9"),
			[]quota{{"", 9, 0, 9 * time.Second}}},
		{"ietf byte sequence not base64", h("RateLimit", `"a";r=1;t=2;pk=:A:`, "X-RateLimit-Remaining", "9", "X-RateLimit-Reset", "9"),
			[]quota{{"", 9, 0, 9 * time.Second}}},
		{"ietf invalid policy ignored", h("RateLimit-Policy", `"a";q=5,`, "RateLimit", `"a";r=1;t=2`),
			[]quota{{"a", 1, 0, 2 * time.Second}}},
		{"ietf last positive q wins", h("RateLimit-Policy", `a;q=5, b;q=6, "a";q=7, a;q=0`, "RateLimit", `"a";r=1;t=2`),
			[]quota{{"a", 1, 7, 2 * time.Second}}},
		{"none", h(), nil},
	} {
		got := readQuotas(tc.h, date)
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
			}
		}
	}
}

// FuzzReadQuotas feeds hostile header values to the parsers: they
// never panic, and what they return is within bounds.
func FuzzReadQuotas(f *testing.F) {
	f.Add(`"burst";r=50;t=30, "daily";r=999;t=3600`, `"burst";q=100;w=60`, "7", "30", "3")
	f.Add(`a;r=1;t=2;pk=:cGsx:;x=?1;y="s\"q"`, `a;q=-1`, "0", "1800000060", "Mon, 30 Nov 2026 12:00:07 GMT")
	f.Add(`"a";r=999999999999999;t=999999999999999`, ``, "99999999999999999999", "-1", "")
	f.Add(`,,`, `"`, "x", "1e3", "1.5")
	f.Fuzz(func(t *testing.T, rl, policy, remaining, reset, retryAfter string) {
		h := http.Header{}
		h.Set("RateLimit", rl)
		h.Set("RateLimit-Policy", policy)
		h.Set("X-RateLimit-Remaining", remaining)
		h.Set("X-RateLimit-Reset", reset)
		date := time.Unix(1_800_000_000, 0)
		qs := readQuotas(h, date)
		if len(qs) > maxQuotas {
			t.Fatalf("%d quotas", len(qs))
		}
		for _, q := range qs {
			if q.remaining < 0 || q.limit < 0 || q.reset < 0 || q.reset > (maxSeconds+1)*time.Second {
				t.Fatalf("out of bounds: %+v", q)
			}
		}
		if d, ok := parseRetryAfter(retryAfter, date); d < 0 || d > maxSeconds*time.Second || (!ok && d != 0) {
			t.Fatalf("Retry-After %q: %v, %v", retryAfter, d, ok)
		}
	})
}

// TestTransportReadsShedHeaders: the Transport reads the RateLimit and
// RateLimit-Policy fields shed's middleware writes (a rule name with
// quotes and a backslash included), so a sluice client understands a
// sluice server: what it reads for the deciding rule is what the
// X-RateLimit-* fields of the same response say.
func TestTransportReadsShedHeaders(t *testing.T) {
	const odd = `odd "name" \ here`
	c, err := shed.New([]shed.Rule{
		{Name: "burst", Identity: shed.IP, Algorithm: shed.TokenBucket, Limit: 100, Rate: ratelimit.Per(100, time.Minute)},
		{Name: odd, Identity: shed.IP, Algorithm: shed.FixedWindow, Limit: 3, Window: time.Hour},
	}, shed.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := c.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 4 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		hd := w.Header()
		got := readQuotas(hd, time.Now())
		if len(got) != 1 {
			t.Fatalf("request %d: RateLimit %q, RateLimit-Policy %q: read %+v, want one quota",
				i, hd.Get("RateLimit"), hd.Get("RateLimit-Policy"), got)
		}
		q := got[0]
		want := quota{name: odd, remaining: max(0, int64(2-i)), limit: 3, reset: q.reset}
		if q != want || hd.Get("X-RateLimit-Remaining") != strconv.FormatInt(want.remaining, 10) ||
			q.reset <= 0 || q.reset > time.Hour {
			t.Fatalf("request %d: RateLimit %q, RateLimit-Policy %q, X-RateLimit-Remaining %q: read %+v, want %+v (reset within the hour)",
				i, hd.Get("RateLimit"), hd.Get("RateLimit-Policy"), hd.Get("X-RateLimit-Remaining"), q, want)
		}
	}
}

// BenchmarkReadQuotas measures reading the quota fields of one
// upstream response, per shape of header the Transport meets.
func BenchmarkReadQuotas(b *testing.B) {
	date := time.Unix(1_800_000_000, 0)
	for _, bc := range []struct {
		name string
		kv   []string
	}{
		{"ietf", []string{"RateLimit", `"burst";r=50;t=30`}},
		{"ietf-policy", []string{
			"RateLimit-Policy", `"burst";q=100;w=60, "daily";q=1000;w=86400`,
			"RateLimit", `"burst";r=50;t=30, "daily";r=999;t=3600`}},
		{"ietf-invalid", []string{"RateLimit", `"burst";r=50;t=30,`, "X-RateLimit-Remaining", "7", "X-RateLimit-Reset", "30"}},
		{"x-ratelimit", []string{"X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "7", "X-RateLimit-Reset", "30"}},
	} {
		h := http.Header{}
		for i := 0; i < len(bc.kv); i += 2 {
			h.Add(bc.kv[i], bc.kv[i+1])
		}
		if len(readQuotas(h, date)) == 0 {
			b.Fatalf("%s: no quota read from %v", bc.name, h)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				readQuotas(h, date)
			}
		})
	}
}
