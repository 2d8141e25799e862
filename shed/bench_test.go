package shed

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
)

// discardWriter is a ResponseWriter whose header map is reused.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

func benchRules() []Rule {
	return []Rule{
		{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 1 << 30, Rate: concurrency.Per(1_000_000, time.Second)},
		{Name: "global", Algorithm: TokenBucket, Limit: 1 << 30, Rate: concurrency.Per(1_000_000_000, time.Second)},
		{Name: "inflight", Algorithm: Concurrency, Limit: 1 << 20},
	}
}

func BenchmarkParts(b *testing.B) {
	c, err := New(benchRules(), quiet())
	if err != nil {
		b.Fatal(err)
	}
	ips := make([]netip.Addr, 1024)
	reqs := make([]*http.Request, 1024)
	for i := range ips {
		ips[i] = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		reqs[i] = httptest.NewRequest("GET", "/", nil)
		reqs[i].RemoteAddr = ips[i].String() + ":4000"
	}
	b.Run("decide", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, tok, _ := c.Decide(context.Background(), Attempt{IP: ips[i&1023]})
			tok.Done(Success)
		}
	})
	b.Run("clientip", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_ = c.res.ClientIP(reqs[i&1023])
		}
	})
	b.Run("headers", func(b *testing.B) {
		_, tok, _ := c.Decide(context.Background(), Attempt{IP: ips[0]})
		d, _, _ := c.Decide(context.Background(), Attempt{IP: ips[0]})
		tok.Done(Success)
		h := http.Header{}
		b.ReportAllocs()
		for b.Loop() {
			d.WriteHeaders(h)
		}
	})
	b.Run("middleware", func(b *testing.B) {
		h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		w := &discardWriter{h: http.Header{}}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			h.ServeHTTP(w, reqs[i&1023])
		}
	})
	b.Run("bare", func(b *testing.B) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
		w := &discardWriter{h: http.Header{}}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			h.ServeHTTP(w, reqs[i&1023])
		}
	})
}
