package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/shed"
)

// costTenants is how many tenants the requests of BenchmarkMiddlewareCost
// come from.
const costTenants = 1000

// costRequests builds one request per client address, each from one of
// costTenants tenants, each saying what it expects to cost.
func costRequests() []*http.Request {
	reqs := middlewareRequests(middlewareClients)
	for i, r := range reqs {
		r.Header.Set("X-Tenant", fmt.Sprint("tenant-", i%costTenants))
		r.Header.Set("X-Estimated-Tokens", "500")
	}
	return reqs
}

// BenchmarkMiddlewareCost measures what a cost function and an
// after-the-fact charge add to the middleware: the same per-tenant daily
// token budget (a FixedWindow high enough never to reject), the same
// requests (with an estimate header) and the same handler (which reports
// the tokens it used in a response header) in every case; only the options
// differ. plain charges 1 per request; cost charges the request's
// estimate (WithCost); cost-actual also charges or gives back the
// difference to what the handler reported (WithActualCost), which is one
// more operation on the rule's state per request; cost-actual-headerget
// is cost-actual with funcs that read their fields with Header.Get.
func BenchmarkMiddlewareCost(b *testing.B) {
	reqs := costRequests()
	contentType, used := []string{"text/plain; charset=utf-8"}, []string{"420"}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Type"], h["X-Tokens-Used"] = contentType, used
		w.WriteHeader(http.StatusOK)
	})
	client := shed.WithClient(func(r *http.Request) shed.Client {
		return shed.Client{Tenant: r.Header.Get("X-Tenant")}
	})
	// The cost funcs read their header fields by their canonical names,
	// straight from the map: what sluice adds is measured, not
	// textproto's canonicalization (the -headerget case has that too).
	estimate := shed.WithCost(func(r *http.Request) int64 { return tokens(r.Header["X-Estimated-Tokens"], 1) })
	actual := shed.WithActualCost(func(h http.Header) (int64, bool) {
		n := tokens(h["X-Tokens-Used"], -1)
		return n, n >= 0
	})
	estimateGet := shed.WithCost(func(r *http.Request) int64 {
		n, err := strconv.ParseInt(r.Header.Get("X-Estimated-Tokens"), 10, 64)
		if err != nil {
			return 1
		}
		return n
	})
	actualGet := shed.WithActualCost(func(h http.Header) (int64, bool) {
		n, err := strconv.ParseInt(h.Get("X-Tokens-Used"), 10, 64)
		return n, err == nil
	})
	cases := []struct {
		name string
		opts []shed.Option
		unit int64 // what each request is charged in the end
	}{
		{"sluice-plain", []shed.Option{client}, 1},
		{"sluice-cost", []shed.Option{client, estimate}, 500},
		{"sluice-cost-actual", []shed.Option{client, estimate, actual}, 420},
		{"sluice-cost-actual-headerget", []shed.Option{client, estimateGet, actualGet}, 420},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c, err := shed.New([]shed.Rule{{Name: "tokens-daily", Identity: shed.Tenant, Algorithm: shed.FixedWindow,
				Limit: 1 << 45, Window: 24 * time.Hour, Capacity: 2 * costTenants}}, tc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			h := c.Middleware(handler)
			serveAllOK(b, h, reqs)
			// The benchmark checks its own inputs: every tenant keyed
			// apart, nothing held, and each case charged what it says.
			s := c.Stats()
			if n := s.Rules[0].Table.Entries; b.N >= 4*len(reqs) && n != costTenants {
				b.Errorf("the tenant rule holds %d keys, want %d", n, costTenants)
			}
			if s.Inflight != 0 {
				b.Errorf("%d permits still held", s.Inflight)
			}
			var charged int64
			for t := range costTenants {
				d, tok, err := c.Decide(context.Background(), shed.Attempt{Tenant: fmt.Sprint("tenant-", t)})
				if err != nil || !d.Allowed {
					b.Fatalf("read-out of tenant %d: %v %v", t, d, err)
				}
				charged += d.Limit - d.Remaining - 1
				tok.Done(shed.Success)
			}
			if want := int64(b.N) * tc.unit; charged != want {
				b.Errorf("the tenants were charged %d in all, want %d x %d (a day boundary in the run resets them)", charged, b.N, tc.unit)
			}
			_ = c.Close()
		})
	}
}

// tokens parses the first value of a header field, or returns def.
func tokens(v []string, def int64) int64 {
	if len(v) == 0 {
		return def
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil {
		return def
	}
	return n
}
