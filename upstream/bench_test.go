package upstream

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// BenchmarkRoundTrip is the Transport's own cost per request on a path
// that never waits (a limit far above the benchmark's rate), in each mode,
// over an in-memory upstream (whose own cost is the "bare" case).
func BenchmarkRoundTrip(b *testing.B) {
	up := inMemory{http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	limit := ratelimit.Per(100_000_000, time.Second) // 10 ns apart: never a wait at ~1 µs a request
	cases := []struct {
		name string
		rt   func() (http.RoundTripper, error)
	}{
		{"bare", func() (http.RoundTripper, error) { return up, nil }},
		{"bucket", func() (http.RoundTripper, error) { return NewTransport(up, limit, WithBurst(1<<30)) }},
		{"pacer", func() (http.RoundTripper, error) { return NewTransport(up, limit) }},
		{"bucket-cap", func() (http.RoundTripper, error) {
			return NewTransport(up, limit, WithBurst(1<<30), WithConcurrency(1<<20))
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			rt, err := c.rt()
			if err != nil {
				b.Fatal(err)
			}
			req, _ := http.NewRequest("GET", "http://api.example/", nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("round trip: %v %v", resp, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
