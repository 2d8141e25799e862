// Command mlinference protects an inference endpoint served by a small pool
// of accelerators (simulated: 4 of them, 40 ms an inference). Two limits
// work together:
//
//   - per API key, at most 4 requests at once (a per-key Concurrency rule):
//     one client cannot take every accelerator; over it, 429;
//
//   - for the whole endpoint, an adaptive concurrency limit (an Adaptive
//     rule over adaptive.Default) that watches latency and settles where
//     the accelerators are busy but requests do not queue in front of them;
//     over it, 503 with Retry-After, at once, instead of a queue that grows
//     until every request times out.
//
//     go run ./examples/mlinference              # serve on 127.0.0.1:8081
//     go run ./examples/mlinference -selftest    # drive bursts and a load against itself
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/shed"
)

const (
	accelerators = 4
	serviceTime  = 40 * time.Millisecond
	perKey       = 4 // requests at once per API key
)

func main() {
	demo.Command{
		Addr:     "127.0.0.1:8081",
		Drives:   "drive bursts and a load against itself",
		SelfTest: func(out io.Writer) error { _, err := selfTest(out, 2*time.Second); return err },
		Serve: func(out io.Writer, addr string) (http.Handler, error) {
			h, _, err := newHandler(newModel().infer)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "inference on http://%s/infer: %d simulated accelerators, %v each; %d at once per X-API-Key, adaptive limit overall\n",
				addr, accelerators, serviceTime, perKey)
			fmt.Fprintf(out, "try: curl -si -H 'X-API-Key: k1' http://%s/infer\n", addr)
			fmt.Fprintf(out, "     curl -sZ -o /dev/null -w '%%{http_code}\\n' -H 'X-API-Key: k1' 'http://%s/infer?n=[1-8]' 2>/dev/null | sort | uniq -c\n", addr)
			fmt.Fprintf(out, "     for k in $(seq 16); do curl -sZ -o /dev/null -w '%%{http_code}\\n' -H \"X-API-Key: k$k\" 'http://%s/infer?n=[1-4]' & done 2>/dev/null | sort | uniq -c\n", addr)
			return h, nil
		},
	}.Main()
}

// newHandler returns the inference endpoint, which runs infer, behind
// sluice, and the Controller (for its Stats).
func newHandler(infer func(context.Context) error) (http.Handler, *shed.Controller, error) {
	alg, err := adaptive.NewDefault(
		adaptive.WithInitialLimit(16), adaptive.WithLimits(accelerators, 64),
		// An answer slower than 3 inferences is unhealthy, whatever the
		// latency baseline says.
		adaptive.WithMaxHealthyLatency(3*serviceTime))
	if err != nil {
		return nil, nil, err
	}
	lim, err := adaptive.NewLimiter(alg)
	if err != nil {
		return nil, nil, err
	}
	sluice, err := shed.New([]shed.Rule{
		{Name: "endpoint", Algorithm: shed.Adaptive, Limiter: lim},
		{Name: "per-key", Identity: shed.APIKey, Algorithm: shed.Concurrency, Limit: perKey, LeaseTTL: 10 * time.Second},
	}, shed.WithClient(func(r *http.Request) shed.Client { return shed.Client{APIKey: r.Header.Get("X-API-Key")} }))
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /infer", sluice.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := infer(r.Context()); err != nil {
			// A 5xx tells the adaptive limit the request was dropped.
			http.Error(w, "inference failed", http.StatusGatewayTimeout)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"label": "cat", "score": 0.97}`)
	})))
	return mux, sluice, nil
}

// model simulates the accelerators: an inference takes one for
// serviceTime; when all are busy, requests queue in front of them, as on a
// real inference server, and their latency grows.
type model struct {
	slots chan struct{}
}

func newModel() *model { return &model{slots: make(chan struct{}, accelerators)} }

func (m *model) infer(ctx context.Context) error {
	select {
	case m.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-m.slots }()
	t := time.NewTimer(serviceTime)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
