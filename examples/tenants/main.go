// Command tenants rate-limits a report endpoint per tenant, as a SaaS API
// does: a burst allowance (a token bucket of 10, refilled at 5 a minute)
// AND a daily quota (100 a day). Past 80% of either, responses carry
// X-RateLimit-Warning so that a client can slow down before it is refused;
// every response carries RateLimit and RateLimit-Policy (IETF draft) and
// X-RateLimit-*. The tenant comes from the X-Tenant header (in a real
// service, from its authentication).
//
//	go run ./examples/tenants              # serve on 127.0.0.1:8084
//	go run ./examples/tenants -selftest    # drive two tenants against itself
//
// With -redis ADDR the quotas live in Redis, so several instances share
// them: run two, on -addr 127.0.0.1:8084 and -addr 127.0.0.1:8085, both with
// -redis 127.0.0.1:6379, and a tenant's 10-request burst is spent across
// both. When Redis stops answering, each instance falls back to its share of
// the quota (half of it with two instances), never to no limit.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/redisstore"
)

// redisQuotas returns a store that keeps the quotas in Redis at addr, with
// the fallback to this instance's share of each quota (instances counted
// through heartbeats) while Redis is down or slow. It serves for the life
// of the process.
func redisQuotas(addr string) (store.Store, error) {
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	s, err := redisstore.New(client, redisstore.WithPrefix("sluice-tenants"))
	if err != nil {
		client.Close()
		return nil, err
	}
	f, err := redisstore.NewFallback(s)
	if err != nil {
		client.Close()
		return nil, err
	}
	return f, nil
}

func main() {
	redisAddr := flag.String("redis", "", "keep the quotas in the Redis server at this address (shared by every instance), falling back to this instance's share when it is down")
	demo.Command{
		Addr:     "127.0.0.1:8084",
		Drives:   "drive two tenants against itself (on a simulated clock)",
		SelfTest: func(out io.Writer) error { _, err := selfTest(out); return err },
		Serve: func(out io.Writer, addr string) (http.Handler, error) {
			var opts []shed.Option
			if *redisAddr != "" {
				st, err := redisQuotas(*redisAddr)
				if err != nil {
					return nil, err
				}
				opts = append(opts, shed.WithStore(st))
				fmt.Fprintf(out, "quotas shared through Redis at %s\n", *redisAddr)
			}
			h, err := newHandler(opts...)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "reports on http://%s/report: per tenant, bursts of 10 then 5 a minute, and 100 a day\n", addr)
			fmt.Fprintf(out, "try: for i in $(seq 12); do curl -s -o /dev/null -w '%%{http_code} ' -H 'X-Tenant: acme' http://%s/report; done\n", addr)
			fmt.Fprintf(out, "     curl -si -H 'X-Tenant: acme' http://%s/report\n", addr)
			return h, nil
		},
	}.Main()
}

// newHandler returns the report endpoint behind sluice's per-tenant rules.
func newHandler(opts ...shed.Option) (http.Handler, error) {
	rules := []shed.Rule{
		{Name: "burst", Identity: shed.Tenant, Algorithm: shed.TokenBucket, Limit: 10, Rate: ratelimit.Per(5, time.Minute)},
		{Name: "daily", Identity: shed.Tenant, Algorithm: shed.FixedWindow, Limit: 100, Window: 24 * time.Hour},
	}
	opts = append(opts, shed.WithClient(func(r *http.Request) shed.Client {
		return shed.Client{Tenant: r.Header.Get("X-Tenant")}
	}))
	sluice, err := shed.New(rules, opts...)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /report", sluice.Middleware(http.HandlerFunc(report)))
	return mux, nil
}

// report is the endpoint itself. A request without a tenant is refused
// here: the tenant rules do not apply to it.
func report(w http.ResponseWriter, r *http.Request) {
	tenant := r.Header.Get("X-Tenant")
	if tenant == "" {
		http.Error(w, "X-Tenant required", http.StatusUnauthorized)
		return
	}
	fmt.Fprintf(w, "report for %s\n", tenant)
}
