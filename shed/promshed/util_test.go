package promshed_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/promshed"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newCollector returns c's collector, registered nowhere.
func newCollector(t *testing.T, c *shed.Controller) *promshed.Collector {
	t.Helper()
	col, err := promshed.New(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	return col
}

// pedantic returns a pedantic registry (it checks Collect against
// Describe) holding col alone.
func pedantic(t *testing.T, col prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(col); err != nil {
		t.Fatal(err)
	}
	return reg
}

// noDefaultSeries fails t when the default registry holds a sluice_ metric:
// the collectors never register there.
func noDefaultSeries(t *testing.T) {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "sluice_") {
			t.Errorf("default registry holds %s", mf.GetName())
		}
	}
}
