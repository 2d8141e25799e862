package otelshed_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/otelshed"
)

// BenchmarkObserve is the cost an Observer adds to each decision, on the
// noop provider (otelshed's own work) and on the SDK (what a service pays).
func BenchmarkObserve(b *testing.B) {
	for _, p := range []struct {
		name string
		mp   func() metric.MeterProvider
	}{
		{"noop", func() metric.MeterProvider { return noop.NewMeterProvider() }},
		{"sdk", func() metric.MeterProvider {
			return sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		}},
	} {
		m, err := otelshed.New(p.mp(), newController(b, nil))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(p.name+"/decision", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					m.ObserveDecision(shed.Admitted, 3*time.Microsecond)
				}
			})
		})
		b.Run(p.name+"/queue_wait", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					m.ObserveQueueWait("inflight", 2*time.Millisecond, true)
				}
			})
		})
		_ = m.Unregister()
	}
}

// BenchmarkCollect is one collection of the two-rule Controller of
// newController: the callback's Stats snapshot and every observation.
func BenchmarkCollect(b *testing.B) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	m, err := otelshed.New(mp, newController(b, nil))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Unregister()
	var rm metricdata.ResourceMetrics
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Collect(context.Background(), &rm); err != nil {
			b.Fatal(err)
		}
	}
	if len(rm.ScopeMetrics) != 1 || len(rm.ScopeMetrics[0].Metrics) < 30 {
		b.Fatalf("collected %+v", rm.ScopeMetrics)
	}
}
