// Command regions serves one tenant's daily quota from two regions, eu and
// us, each deciding on its own store in real time and exchanging usage
// through a global store every sync period (package store/regions), so
// that together they stay within the quota, give or take the bound the
// package states: the limit less a 10% headroom, plus what one region
// admits in one sync period and read delay.
//
//	go run ./examples/regions              # eu on 127.0.0.1:8086, us on 127.0.0.1:8087
//	go run ./examples/regions -selftest    # flood both regions, print the outcome
//
// Each region keeps its counts in a store.Memory and the global store is in
// this process, behind a simulated cross-region latency: nothing else is
// needed. With -redis ADDR the regions' counts and the global store live in
// that Redis instead (under prefixes of their own), as they would on one
// Redis per region and a global one.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/regions"
)

// The quota and the sync of the example.
const (
	dailyLimit = 500
	period     = 200 * time.Millisecond
	// latency is the simulated one-way latency to the global store.
	latency = 20 * time.Millisecond
)

// slowExchange is an Exchange behind a cross-region link: each call waits
// for latency first.
type slowExchange struct{ regions.Exchange }

func (x slowExchange) wait(ctx context.Context) error {
	t := time.NewTimer(latency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (x slowExchange) Publish(ctx context.Context, region string, u []regions.Usage) error {
	if err := x.wait(ctx); err != nil {
		return err
	}
	return x.Exchange.Publish(ctx, region, u)
}

func (x slowExchange) Others(ctx context.Context, region string, u []regions.Usage) error {
	if err := x.wait(ctx); err != nil {
		return err
	}
	return x.Exchange.Others(ctx, region, u)
}

// world is the two regions: their stores and their handlers.
type world struct {
	names    []string
	stores   []*regions.Store
	handlers []http.Handler
	close    func()
}

// newWorld builds the regions on Memory stores and an in-process global
// store, or on the Redis at redisAddr when it is not empty.
func newWorld(redisAddr string) (*world, error) {
	w := &world{names: []string{"eu", "us"}}
	var global regions.Exchange = slowExchange{new(regions.MemoryExchange)}
	local := func(string) (store.Store, error) { return store.NewMemory(), nil }
	var closers []func()
	if redisAddr != "" {
		client := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
		closers = append(closers, func() { _ = client.Close() })
		g, err := redisstore.New(client, redisstore.WithPrefix("sluice-regions-global"), redisstore.WithTimeout(time.Second))
		if err != nil {
			client.Close()
			return nil, err
		}
		global = slowExchange{g.Exchange()}
		local = func(name string) (store.Store, error) {
			return redisstore.New(client, redisstore.WithPrefix("sluice-regions-"+name), redisstore.WithTimeout(200*time.Millisecond))
		}
	}
	w.close = func() {
		for _, s := range w.stores {
			_ = s.Close()
		}
		for _, c := range closers {
			c()
		}
	}
	for _, name := range w.names {
		l, err := local(name)
		if err != nil {
			w.close()
			return nil, err
		}
		s, err := regions.New(name, l, global, regions.WithPeriod(period))
		if err != nil {
			w.close()
			return nil, err
		}
		w.stores = append(w.stores, s)
		h, err := newHandler(name, s)
		if err != nil {
			w.close()
			return nil, err
		}
		w.handlers = append(w.handlers, h)
	}
	return w, nil
}

// newHandler returns region name's report endpoint behind the daily quota
// per tenant, kept in s.
func newHandler(name string, s store.Store) (http.Handler, error) {
	rules := []shed.Rule{{Name: "daily", Identity: shed.Tenant, Algorithm: shed.FixedWindow, Limit: dailyLimit, Window: 24 * time.Hour}}
	c, err := shed.New(rules, shed.WithStore(s), shed.WithClient(func(r *http.Request) shed.Client {
		return shed.Client{Tenant: r.Header.Get("X-Tenant")}
	}))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /report", c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "report for %s from %s\n", r.Header.Get("X-Tenant"), name)
	})))
	return mux, nil
}

func main() {
	redisAddr := flag.String("redis", "", "keep the regions' counts and the global store in the Redis at this address")
	demo.Command{
		Addr:     "127.0.0.1:8086",
		Drives:   "flood one tenant from both regions for two seconds",
		SelfTest: func(out io.Writer) error { _, err := selfTest(out, *redisAddr); return err },
		Serve: func(out io.Writer, addr string) (http.Handler, error) {
			w, err := newWorld(*redisAddr)
			if err != nil {
				return nil, err
			}
			// us on the next port; eu is what -addr serves.
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			var p int
			if _, err := fmt.Sscan(port, &p); err != nil {
				return nil, err
			}
			usAddr := net.JoinHostPort(host, fmt.Sprint(p+1))
			go func() {
				err := (&http.Server{Addr: usAddr, Handler: w.handlers[1], ReadHeaderTimeout: 5 * time.Second}).ListenAndServe()
				fmt.Fprintf(out, "us: %v\n", err)
			}()
			fmt.Fprintf(out, "eu on http://%s/report, us on http://%s/report: %d a day per tenant, both regions together\n", addr, usAddr, dailyLimit)
			fmt.Fprintf(out, "try: for i in $(seq 300); do curl -s -o /dev/null -w '%%{http_code} ' -H 'X-Tenant: acme' http://%s/report; curl -s -o /dev/null -w '%%{http_code} ' -H 'X-Tenant: acme' http://%s/report; done\n", addr, usAddr)
			return w.handlers[0], nil
		},
	}.Main()
}
