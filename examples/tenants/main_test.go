package main

import (
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSelfTest(t *testing.T) {
	got, err := selfTest(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var globex, acme []answer
	for _, a := range got {
		if a.tenant == "globex" {
			globex = append(globex, a)
		} else {
			acme = append(acme, a)
		}
	}
	if len(globex) != 11 || len(acme) != 101 {
		t.Fatalf("%d globex and %d acme answers, want 11 and 101", len(globex), len(acme))
	}
	if p := got[0].policy; !strings.Contains(p, `"burst";q=10`) || !strings.Contains(p, `"daily";q=100;w=86400`) {
		t.Errorf("RateLimit-Policy %q, want both policies", p)
	}

	// The burst: 10 at once, a warning from the 8th (80% of 10), the 11th
	// refused until one token is back (60 s / 5).
	for _, a := range globex[:10] {
		if a.status != 200 {
			t.Errorf("globex #%d: %d, want 200", a.n, a.status)
		}
		if warned := strings.Contains(a.warning, `"burst"`); warned != (a.n >= 8) {
			t.Errorf("globex #%d: X-RateLimit-Warning %q", a.n, a.warning)
		}
	}
	if a := globex[10]; a.status != 429 || a.retryAfter != "12" {
		t.Errorf("globex #11: %d Retry-After %q, want 429 Retry-After 12", a.status, a.retryAfter)
	}

	// The day: 100 admitted at the refill pace, a warning from the 80th,
	// the 101st refused until the day's window ends.
	for _, a := range acme[:100] {
		if a.status != 200 {
			t.Errorf("acme #%d: %d, want 200", a.n, a.status)
		}
		if warned := strings.Contains(a.warning, `"daily"`); warned != (a.n >= 80) {
			t.Errorf("acme #%d: X-RateLimit-Warning %q", a.n, a.warning)
		}
	}
	if a := acme[100]; a.status != 429 || !strings.HasPrefix(a.rateLimit, `"daily";r=0`) || a.retryAfter != "85200" {
		t.Errorf("acme #101: %d RateLimit %q Retry-After %q, want 429 by daily, Retry-After 85200 (the day less 100 × 12 s)",
			a.status, a.rateLimit, a.retryAfter)
	}
}
