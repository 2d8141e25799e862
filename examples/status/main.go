// Command status serves an API behind sluice with its live status page
// (package shed/statuspage) at /debug/sluice/: an adaptive limit for the
// whole API in front of a backend of 4 slots (10 ms a request), with a
// short wait for a permit over it, a token
// bucket per user (X-User), and a penalty box for users who keep going
// over it. With -selftest it drives a load of well-behaved users and one
// that hammers, and prints what the page's JSON report said.
//
//	go run ./examples/status              # serve on 127.0.0.1:8086; open /debug/sluice/
//	go run ./examples/status -selftest    # drive a load against itself
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/statuspage"
)

const (
	slots       = 4                     // requests the backend serves at once
	serviceTime = 10 * time.Millisecond // per request
	perUser     = 20                    // requests a second per user, and the burst
)

func main() {
	demo.Command{
		Addr:     "127.0.0.1:8086",
		Drives:   "drive a load of users, one of them abusive, against itself",
		SelfTest: func(out io.Writer) error { _, err := selfTest(out, 2*time.Second); return err },
		Serve: func(out io.Writer, addr string) (http.Handler, error) {
			svc, err := newService()
			if err != nil {
				return nil, err
			}
			go svc.page.Run(context.Background()) // for the life of the process
			fmt.Fprintf(out, "API on http://%s/api (X-User header), status page on http://%s/debug/sluice/\n", addr, addr)
			fmt.Fprintf(out, "try: for i in $(seq 200); do curl -s -o /dev/null -H 'X-User: u1' http://%s/api & done; wait\n", addr)
			fmt.Fprintf(out, "     curl -s http://%s/debug/sluice/json\n", addr)
			return svc.handler, nil
		},
	}.Main()
}

// service is the API behind sluice and its status page.
type service struct {
	handler http.Handler
	page    *statuspage.Page
}

func newService() (*service, error) {
	alg, err := adaptive.NewDefault(adaptive.WithInitialLimit(16), adaptive.WithLimits(2, 64),
		adaptive.WithMaxHealthyLatency(3*serviceTime))
	if err != nil {
		return nil, err
	}
	lim, err := adaptive.NewLimiter(alg)
	if err != nil {
		return nil, err
	}
	box, err := penalty.NewBox(10_000, penalty.WithStrikes(3, time.Minute))
	if err != nil {
		return nil, err
	}
	sluice, err := shed.New([]shed.Rule{
		{Name: "per-user", Identity: shed.User, Algorithm: shed.TokenBucket, Limit: perUser, Rate: ratelimit.Per(perUser, time.Second), Capacity: 10_000},
		// Over the adaptive limit, a request may wait up to 5 service
		// times for a permit; it is shed at once when the limiter predicts
		// a longer wait.
		{Name: "api", Algorithm: shed.Adaptive, Limiter: lim, MaxWait: 5 * serviceTime},
	},
		shed.WithPenalties(box, shed.User),
		shed.WithClient(func(r *http.Request) shed.Client { return shed.Client{User: r.Header.Get("X-User")} }))
	if err != nil {
		return nil, err
	}
	page, err := statuspage.New(sluice)
	if err != nil {
		return nil, err
	}
	backend := make(chan struct{}, slots)
	mux := http.NewServeMux()
	mux.Handle("GET /api", sluice.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // a slot of the backend, then its service time
		case backend <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		time.Sleep(serviceTime)
		<-backend
		fmt.Fprintln(w, "ok")
	})))
	mux.Handle("/debug/sluice/", http.StripPrefix("/debug/sluice", page))
	return &service{handler: mux, page: page}, nil
}
