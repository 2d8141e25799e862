// Command login protects a login endpoint the way the field recommends:
// layered exact limits, 20 attempts per 15 minutes per IP AND 5 per 15
// minutes per account (sliding logs); progressive penalties for a client
// that keeps hammering (three over-limit rejections within 15 minutes put
// its IP in a timeout of 5 minutes, then 15, then an hour); and fail-closed
// rules: when the limit store cannot answer, logins are refused with 503
// rather than let a credential-stuffing run through unchecked.
//
//	go run ./examples/login              # serve on 127.0.0.1:8083
//	go run ./examples/login -selftest    # drive a short burst against itself
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/store"
)

func main() {
	demo.Command{
		Addr:     "127.0.0.1:8083",
		Drives:   "drive a short burst against itself",
		SelfTest: func(out io.Writer) error { _, err := selfTest(out); return err },
		Serve: func(out io.Writer, addr string) (http.Handler, error) {
			h, _, err := newHandler()
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "login on http://%s/login: 5 attempts per account and 20 per IP per 15 minutes\n", addr)
			fmt.Fprintf(out, "try: for i in $(seq 9); do curl -s -o /dev/null -w '%%{http_code} ' -d user=alice -d password=guess http://%s/login; done\n", addr)
			fmt.Fprintf(out, "     curl -si -d user=alice -d password=guess http://%s/login\n", addr)
			return h, nil
		},
	}.Main()
}

// newHandler returns the login endpoint behind sluice, and the switch that
// takes its limit store down (for the self-test's fail-closed step).
func newHandler() (http.Handler, *atomic.Bool, error) {
	st := &switchableStore{Store: store.NewMemory()} // a -redis flag would put a Redis store here
	rules := []shed.Rule{
		{Name: "login-ip", Identity: shed.IP, Algorithm: shed.SlidingLog, Limit: 20, Window: 15 * time.Minute, Failure: shed.FailClosed},
		{Name: "login-user", Identity: shed.User, Algorithm: shed.SlidingLog, Limit: 5, Window: 15 * time.Minute, Failure: shed.FailClosed},
	}
	box, err := penalty.NewBox(100_000, penalty.WithStrikes(3, 15*time.Minute))
	if err != nil {
		return nil, nil, err
	}
	sluice, err := shed.New(rules,
		shed.WithStore(st),
		shed.WithPenalties(box, shed.IP),
		// The account is the one the client tries to log in as.
		shed.WithClient(func(r *http.Request) shed.Client { return shed.Client{User: r.PostFormValue("user")} }),
	)
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /login", http.MaxBytesHandler(sluice.Middleware(http.HandlerFunc(login)), 4<<10))
	return mux, &st.down, nil
}

// login is the endpoint itself: a stand-in password check.
func login(w http.ResponseWriter, r *http.Request) {
	if r.PostFormValue("user") == "alice" && r.PostFormValue("password") == "correct horse battery staple" {
		fmt.Fprintln(w, "welcome, alice")
		return
	}
	http.Error(w, "wrong user or password", http.StatusUnauthorized)
}

// switchableStore is a store that can be taken down, standing in for a
// Redis outage.
type switchableStore struct {
	store.Store
	down atomic.Bool
}

func (s *switchableStore) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	if s.down.Load() {
		return store.ErrUnavailable
	}
	return s.Store.Decide(ctx, req, res)
}
