package shed

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a clock the test moves.
type fakeClock struct{ t atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.t.Store(int64(1) << 40)
	return c
}

func (c *fakeClock) now() int64                 { return c.t.Load() }
func (c *fakeClock) add(d time.Duration)        { c.t.Add(int64(d)) }
func quiet() Option                             { return WithLogger(slog.New(slog.DiscardHandler)) }
func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

// newTest returns a Controller on a fake clock and its middleware around
// ok.
func newTest(t *testing.T, rules []Rule, opts ...Option) (*Controller, http.Handler, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	c, err := New(rules, append([]Option{WithClock(clk.now), quiet()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, c.Middleware(http.HandlerFunc(ok)), clk
}

// send serves one GET / from peer ip through h.
func send(h http.Handler, ip string, mods ...func(*http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = ip + ":40000"
	for _, m := range mods {
		m(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
