package otelshed_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/otelshed"
)

// Exporting a Controller's decisions through the application's own
// MeterProvider (here with a ManualReader; in a service, a periodic reader
// and an OTLP exporter).
func Example() {
	sluice, err := shed.New([]shed.Rule{
		{Name: "per-ip", Identity: shed.IP, Algorithm: shed.TokenBucket, Limit: 2, Rate: ratelimit.Per(1, time.Minute)},
	})
	if err != nil {
		panic(err)
	}
	defer sluice.Close()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	metrics, err := otelshed.New(provider, sluice)
	if err != nil {
		panic(err)
	}
	defer metrics.Unregister()

	handler := sluice.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 3 {
		handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "sluice.rule.decisions" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if p.Value > 0 {
					outcome, _ := p.Attributes.Value("sluice.outcome")
					rule, _ := p.Attributes.Value("sluice.rule.name")
					fmt.Printf("%s %s=%s %s=%s: %d\n", m.Name, "sluice.rule.name", rule.Emit(), "sluice.outcome", outcome.Emit(), p.Value)
				}
			}
		}
	}
	// Unordered output:
	// sluice.rule.decisions sluice.rule.name=per-ip sluice.outcome=allowed: 2
	// sluice.rule.decisions sluice.rule.name=per-ip sluice.outcome=rejected: 1
}
