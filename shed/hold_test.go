package shed

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"unsafe"
)

// TestAStaleTokenCannotEndAMiddlewareRequest: the middleware ends its
// attempts itself (it hands out no Token), on a pooled ticket that an
// earlier Decide may have used; a Token of that earlier use, done again
// while the middleware's request runs, must release nothing of it.
func TestAStaleTokenCannotEndAMiddlewareRequest(t *testing.T) {
	c, err := New([]Rule{{Name: "inflight", Algorithm: Concurrency, Limit: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ran := false
	h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran = true
		// The middleware's writer is its ticket's: the ticket this
		// request holds, whatever the pool handed out.
		a := (*ticket)(unsafe.Add(unsafe.Pointer(w.(*statusWriter)), -int(unsafe.Offsetof(ticket{}.w))))
		stale := Token{a: a, gen: a.gen.Load() - 1} // a Token of the ticket's previous use
		stale.Done(Success)
		stale.DoneStatus(http.StatusOK)
		s := c.Stats()
		if s.Inflight != 1 || s.Rules[0].Inflight != 1 || s.DoubleDone != 2 {
			t.Errorf("after a stale Token's Done: inflight %d, rule inflight %d, double done %d; want 1, 1, 2",
				s.Inflight, s.Rules[0].Inflight, s.DoubleDone)
		}
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if !ran || w.Code != http.StatusOK {
		t.Fatalf("handler ran %v, status %d", ran, w.Code)
	}
	if s := c.Stats(); s.Inflight != 0 || s.Rules[0].Inflight != 0 || s.Admitted != 1 {
		t.Errorf("after the request: inflight %d, rule inflight %d, admitted %d; want 0, 0, 1", s.Inflight, s.Rules[0].Inflight, s.Admitted)
	}
}
