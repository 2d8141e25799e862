package shed

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// arrivedAt is an ArrivalSource whose bytes arrived at a fixed instant.
type arrivedAt struct {
	at   time.Time
	none bool
}

func (a arrivedAt) LastArrival() (int64, bool) { return a.at.UnixNano(), !a.none }

// defaultRule is an Adaptive rule of adaptive.Default with opts (none:
// the defaults).
func defaultRule(t *testing.T, opts ...adaptive.Option) Rule {
	t.Helper()
	alg, err := adaptive.NewDefault(opts...)
	if err != nil {
		t.Fatal(err)
	}
	l, err := adaptive.NewLimiter(alg)
	if err != nil {
		t.Fatal(err)
	}
	return Rule{Name: "endpoint", Algorithm: Adaptive, Limiter: l}
}

// A request whose connection tells it arrived a second ago has waited past
// Default's queue bound (20ms) before the middleware saw it: it is shed
// with a 503, at once, while the limit has room. One that just arrived,
// one whose source does not know, one without a source and a CriticalPlus
// one that waited as long are admitted.
func TestMiddlewareShedsARequestThatWaitedPastTheQueueBound(t *testing.T) {
	crit := false
	c, err := New([]Rule{defaultRule(t)}, quiet(), WithClient(func(*http.Request) Client {
		if crit {
			return Client{Priority: CriticalPlus}
		}
		return Client{}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	serve := func(ctx context.Context) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
		return rec.Code
	}
	long := WithArrivals(t.Context(), arrivedAt{at: time.Now().Add(-time.Second)})
	if got := serve(long); got != http.StatusServiceUnavailable {
		t.Fatalf("a request that waited 1s: %d, want 503", got)
	}
	if s := c.Stats(); s.Shedding != 1 || s.Rules[0].Rejected != 1 || s.Rules[0].ShedByWait != 1 {
		t.Fatalf("not counted as shed: %+v", s)
	}
	for name, ctx := range map[string]context.Context{
		"just arrived":    WithArrivals(t.Context(), arrivedAt{at: time.Now()}),
		"source unsure":   WithArrivals(t.Context(), arrivedAt{at: time.Now().Add(-time.Second), none: true}),
		"no source":       t.Context(),
		"arrived later?!": WithArrivals(t.Context(), arrivedAt{at: time.Now().Add(time.Hour)}),
	} {
		if got := serve(ctx); got != http.StatusOK {
			t.Fatalf("%s: %d, want 200", name, got)
		}
	}
	crit = true
	if got := serve(long); got != http.StatusOK {
		t.Fatalf("a CriticalPlus request that waited 1s: %d, want 200", got)
	}
}

// Decide takes the wait from the Attempt: past Default's bound, shed.
func TestDecideShedsAnAttemptThatWaitedPastTheQueueBound(t *testing.T) {
	c, err := New([]Rule{defaultRule(t)}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, _, err := c.Decide(t.Context(), Attempt{Queued: 21 * time.Millisecond})
	if err != nil || d.Allowed || d.Kind != Shedding || d.Rule != "endpoint" {
		t.Fatalf("waited 21ms: %+v, %v; want shed by the rule", d, err)
	}
	d, tok, err := c.Decide(t.Context(), Attempt{Queued: 20 * time.Millisecond})
	if err != nil || !d.Allowed {
		t.Fatalf("waited 20ms: %+v, %v; want admitted", d, err)
	}
	tok.Done(Success)
	if rs := c.Stats().Rules[0]; rs.ShedByWait != 1 || rs.Rejected != 1 || rs.QueueBound != 20*time.Millisecond {
		t.Fatalf("rule stats: shed by wait %d of %d rejected, queue bound %v; want 1 of 1, 20ms", rs.ShedByWait, rs.Rejected, rs.QueueBound)
	}
}
