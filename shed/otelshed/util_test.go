package otelshed_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/shed/otelshed"
)

// newReader returns a ManualReader on a fresh SDK MeterProvider, shut
// down when the test ends.
func newReader(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() {
		if err := mp.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return r, mp
}

// sample is one data point of one metric, flattened for comparison.
type sample struct {
	name, kind, unit string
	attrs            attribute.Set
	value            float64 // a counter's or gauge's value, a histogram's sum
	hist             *metricdata.HistogramDataPoint[float64]
}

// series names a data point the way the tests write it:
// name{key=value,...} with the attributes sorted by key.
func (s sample) series() string {
	var kv []string
	for _, a := range s.attrs.ToSlice() {
		kv = append(kv, string(a.Key)+"="+a.Value.Emit())
	}
	return s.name + "{" + strings.Join(kv, ",") + "}"
}

// gather collects r once and returns otelshed's data points.
func gather(t *testing.T, r *sdkmetric.ManualReader) []sample {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []sample
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelshed.ScopeName {
			t.Fatalf("scope %q, want %q", sm.Scope.Name, otelshed.ScopeName)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s: a sum that is not a cumulative counter", m.Name)
				}
				for _, p := range d.DataPoints {
					out = append(out, sample{m.Name, "counter", m.Unit, p.Attributes, float64(p.Value), nil})
				}
			case metricdata.Sum[float64]:
				if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s: a sum that is not a cumulative counter", m.Name)
				}
				for _, p := range d.DataPoints {
					out = append(out, sample{m.Name, "counter", m.Unit, p.Attributes, p.Value, nil})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out = append(out, sample{m.Name, "gauge", m.Unit, p.Attributes, float64(p.Value), nil})
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out = append(out, sample{m.Name, "gauge", m.Unit, p.Attributes, p.Value, nil})
				}
			case metricdata.Histogram[float64]:
				for i := range d.DataPoints {
					p := &d.DataPoints[i]
					out = append(out, sample{m.Name, "histogram", m.Unit, p.Attributes, p.Sum, p})
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// render writes the samples of the named metrics (all when none is
// named), one "series value" line each, sorted.
func render(samples []sample, names ...string) string {
	var lines []string
	for _, s := range samples {
		if len(names) == 0 || slices.Contains(names, s.name) {
			lines = append(lines, fmt.Sprintf("%s %g", s.series(), s.value))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// expect fails t unless the samples of the named metrics (all when none
// is named) render as w, written as for want; when names the moment.
func expect(t *testing.T, samples []sample, when, w string, names ...string) {
	t.Helper()
	if got, w := render(samples, names...), want(w); got != w {
		t.Errorf("%s:\n%s\nwant:\n%s", when, got, w)
	}
}

// want is an expected rendering written as a raw string, one series a
// line in any order: trimmed and sorted as render sorts.
func want(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
