package statuspage_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/statuspage"
	"github.com/sluicehq/sluice/store"
)

// get serves one request of method and path from p and returns the
// response and its body.
func serve(t *testing.T, p http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	res := w.Result()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}

// fataler is what newPage needs of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// newPage returns a Page of c on clk's time, with opts.
func newPage(t fataler, c *shed.Controller, clk *fakeClock, opts ...statuspage.Option) *statuspage.Page {
	t.Helper()
	p, err := statuspage.New(c, append([]statuspage.Option{statuspage.WithClock(clk.now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestJSONReportOfTheRules(t *testing.T) {
	clk := newFakeClock()
	c := newController(t, clk)
	p := newPage(t, c, clk)
	requests(t, c, "198.51.100.1", 4)
	for _, path := range []string{"/json", "/debug/sluice/json"} {
		res, body := serve(t, p, http.MethodGet, path)
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" || res.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("GET %s: %d %q %q", path, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Cache-Control"))
		}
		var rep statuspage.Report
		if err := json.Unmarshal([]byte(body), &rep); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
		if strings.Contains(body, `"t":-0`) {
			t.Errorf("GET %s: the newest point is at -0 s: %s", path, body)
		}
		if len(rep.Rules) != 2 || rep.Rules[0].Name != "per-ip" || rep.Rules[1].Name != "inflight" {
			t.Fatalf("GET %s: rules %+v", path, rep.Rules)
		}
		if r := rep.Rules[0]; r.Allowed != 3 || r.Rejected != 1 || r.Identity != "ip" || r.Algorithm != "token_bucket" || r.Limit != 3 {
			t.Errorf("GET %s: per-ip %+v", path, r)
		}
		if r := rep.Rules[1]; !r.Concurrent || r.Limit != 2 || r.Inflight != 0 {
			t.Errorf("GET %s: inflight %+v", path, r)
		}
	}
	// Unknown rates are null, for scripts to tell them from zero.
	_, body := serve(t, newPage(t, c, clk), http.MethodGet, "/json")
	if !strings.Contains(body, `"admitted":null`) {
		t.Errorf("a first report's admitted rate is not null: %s", body)
	}
}

func TestPageShowsTheRules(t *testing.T) {
	clk := newFakeClock()
	c := newController(t, clk)
	p := newPage(t, c, clk)
	requests(t, c, "198.51.100.1", 4)
	res, body := serve(t, p, http.MethodGet, "/")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`data-rule="per-ip"`, `data-rule="inflight"`,
		`<td data-f="rules.0.allowed" data-fmt="int">3</td>`,
		`<td><span data-f="rules.0.rejected" data-fmt="int">1</span></td>`,
		`<td data-f="rules.1.limit" data-fmt="int">2</td>`,
		`<polyline class="inflight"`,
		"This store does not report its health.",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	res, body = serve(t, p, http.MethodHead, "/")
	if res.StatusCode != 200 || body != "" || res.Header.Get("Content-Length") == "" {
		t.Errorf("HEAD /: %d, body %q, length %q", res.StatusCode, body, res.Header.Get("Content-Length"))
	}
}

func TestPageShowsTheQueueBoundAndTheShedByWaitOfAnAdaptiveRule(t *testing.T) {
	clk := newFakeClock()
	_, body := serve(t, newPage(t, shedByWait(t), clk), http.MethodGet, "/")
	for _, want := range []string{
		` · queue bound <span data-f="rules.0.queue_bound_seconds" data-fmt="ms">20.0 ms</span>`,
		`<small>by wait <span data-f="rules.0.shed_by_wait" data-fmt="count">1</span></small>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// A rule of another algorithm shows neither.
	_, body = serve(t, newPage(t, newController(t, clk), clk), http.MethodGet, "/")
	for _, absent := range []string{"queue bound", "by wait"} {
		if strings.Contains(body, absent) {
			t.Errorf("a page without an Adaptive rule shows %q", absent)
		}
	}
}

func TestPageEscapesRuleNames(t *testing.T) {
	clk := newFakeClock()
	name := `<script>alert("x")</script>`
	c, err := shed.New([]shed.Rule{{Name: name, Category: `"><img src=x>`, Algorithm: shed.Concurrency, Limit: 1}}, shed.WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	_, body := serve(t, newPage(t, c, clk), http.MethodGet, "/")
	if strings.Contains(body, name) || strings.Contains(body, `<img src=x>`) {
		t.Fatal("the page holds a rule's name or category unescaped")
	}
	if !strings.Contains(body, `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`) {
		t.Error("the page lacks the rule's name, escaped")
	}
}

func TestPageIsReadOnly(t *testing.T) {
	clk := newFakeClock()
	p := newPage(t, newController(t, clk), clk)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for _, path := range []string{"/", "/json"} {
			res, _ := serve(t, p, m, path)
			if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q; want 405, GET, HEAD", m, path, res.StatusCode, res.Header.Get("Allow"))
			}
		}
	}
}

// The page loads nothing from elsewhere, and its policy lets exactly its
// own inline style and script run.
func TestPageHasNoExternalAssetsAndItsPolicyHashesItsInlineCode(t *testing.T) {
	clk := newFakeClock()
	res, body := serve(t, newPage(t, newController(t, clk), clk), http.MethodGet, "/")
	if m := regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?\s*([a-z]+:|//)`).FindString(body); m != "" {
		t.Errorf("the page refers elsewhere: %s", m)
	}
	if strings.Contains(body, "<link") || strings.Contains(body, "@import") || strings.Contains(body, "url(") {
		t.Error("the page loads a style sheet or an image")
	}
	csp := res.Header.Get("Content-Security-Policy")
	hash := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"
	}
	for _, el := range []string{"script", "style"} {
		m := regexp.MustCompile(`(?s)<`+el+`>(.*?)</`+el+`>`).FindAllStringSubmatch(body, -1)
		if len(m) != 1 {
			t.Fatalf("%d %s elements, want 1", len(m), el)
		}
		if want := el + "-src " + hash(m[0][1]); !strings.Contains(csp, want) {
			t.Errorf("policy %q lacks %q", csp, want)
		}
	}
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("policy %q", csp)
	}
}

func TestPageShowsNoClientKey(t *testing.T) {
	clk := newFakeClock()
	c, err := shed.New([]shed.Rule{
		{Name: "per-key", Identity: shed.APIKey, Algorithm: shed.FixedWindow, Limit: 1, Window: time.Minute},
		{Name: "per-user", Identity: shed.User, Algorithm: shed.FixedWindow, Limit: 1, Window: time.Minute},
	}, shed.WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	p := newPage(t, c, clk)
	const key, user = "sk_live_0123456789abcdef", "alice@example.com"
	for range 3 {
		d, tok, err := c.Decide(context.Background(), shed.Attempt{APIKey: key, User: user})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			tok.Done(shed.Success)
		}
	}
	for _, path := range []string{"/", "/json"} {
		_, body := serve(t, p, http.MethodGet, path)
		if strings.Contains(body, key) || strings.Contains(body, "0123456789abcdef") || strings.Contains(body, user) {
			t.Errorf("GET %s shows a client's key", path)
		}
		if !strings.Contains(body, "per-key") {
			t.Errorf("GET %s lacks the rule", path)
		}
	}
}

// healthStore is a store that reports a degraded mode.
type healthStore struct {
	store.Store
	h store.Health
}

func (s healthStore) Health() store.Health { return s.h }

func TestStoreHealthShown(t *testing.T) {
	clk := newFakeClock()
	st := healthStore{Store: store.NewMemory(), h: store.Health{Degraded: true, Instances: 4, Share: 0.25, FallbackDecisions: 7, BackendErrors: 3, Trips: 1}}
	c := newController(t, clk, shed.WithStore(st))
	p := newPage(t, c, clk)
	_, body := serve(t, p, http.MethodGet, "/json")
	var rep statuspage.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	want := statuspage.StoreReport{Degraded: true, Instances: 4, Share: 0.25, FallbackDecisions: 7, BackendErrors: 3, Trips: 1}
	if rep.Store == nil || *rep.Store != want {
		t.Fatalf("store %+v, want %+v", rep.Store, want)
	}
	_, body = serve(t, p, http.MethodGet, "/")
	for _, s := range []string{`data-fmt="mode">degraded</p>`, `data-fmt="pct">25%</span>`, `data-fmt="int">4</span> instances`} {
		if !strings.Contains(body, s) {
			t.Errorf("page lacks %q", s)
		}
	}
}

func TestPathsOtherThanThePageAndItsReportAreNotFound(t *testing.T) {
	clk := newFakeClock()
	p := newPage(t, newController(t, clk), clk)
	for path, want := range map[string]int{
		"/": 200, "/json": 200, "/debug/sluice/": 200, "/debug/sluice/json": 200,
		"/favicon.ico": 404, "/debug/sluice/x": 404, "/json/": 200, "/jsonx": 404,
	} {
		if res, _ := serve(t, p, http.MethodGet, path); res.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, res.StatusCode, want)
		}
	}
}

// The page's script asks for the report without the raw history, which
// its charts do not need.
func TestJSONReportWithoutHistory(t *testing.T) {
	clk := newFakeClock()
	p := newPage(t, newController(t, clk), clk)
	_, body := serve(t, p, http.MethodGet, "/json?history=0")
	var rep statuspage.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rules {
		if r.History != nil || r.Chart.Limit == "" {
			t.Errorf("%s: history %v, limit line %q; want no history and the chart", r.Name, r.History, r.Chart.Limit)
		}
	}
	_, body = serve(t, p, http.MethodGet, "/json")
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rules[0].History) == 0 {
		t.Error("the full report lacks the history")
	}
}

// Requests to the page and its report, Run, SampleAt and decisions may
// all run at once (for the race detector).
func TestConcurrentUse(t *testing.T) {
	c := newController(t, newFakeClock())
	p, err := statuspage.New(c, statuspage.WithInterval(time.Millisecond), statuspage.WithHistory(16))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error)
	go func() { ran <- p.Run(ctx) }()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			ip := netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)})
			for j := range 50 {
				path := "/"
				if j%2 == 0 {
					path = "/json"
				}
				w := httptest.NewRecorder()
				p.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
				if w.Code != 200 {
					t.Errorf("GET %s: %d", path, w.Code)
				}
				if d, tok, err := c.Decide(context.Background(), shed.Attempt{IP: ip}); err != nil {
					t.Error(err)
				} else if d.Allowed {
					tok.Done(shed.Success)
				}
			}
		})
		wg.Go(func() {
			for j := range 50 {
				p.SampleAt(int64(time.Hour) + int64(j)*int64(time.Millisecond))
			}
		})
	}
	wg.Wait()
	cancel()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
}
