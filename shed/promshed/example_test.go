package promshed_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/promshed"
)

// Exporting a Controller's decisions on the application's own registry
// (serve it with promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
func Example() {
	sluice, err := shed.New([]shed.Rule{
		{Name: "per-ip", Identity: shed.IP, Algorithm: shed.TokenBucket, Limit: 2, Rate: ratelimit.Per(1, time.Minute)},
	})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	if _, err := promshed.New(reg, sluice); err != nil {
		panic(err)
	}

	handler := sluice.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 3 {
		handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}

	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_rule_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				fmt.Print(mf.GetName(), "{")
				for i, l := range m.GetLabel() {
					if i > 0 {
						fmt.Print(",")
					}
					fmt.Printf("%s=%q", l.GetName(), l.GetValue())
				}
				fmt.Println("}", v)
			}
		}
	}
	// Output:
	// sluice_rule_decisions_total{outcome="allowed",rule="per-ip"} 2
	// sluice_rule_decisions_total{outcome="rejected",rule="per-ip"} 1
}
