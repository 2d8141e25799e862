package otelshed_test

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/otelshed"
)

// Two Controllers on one provider, each with its own sluice.controller,
// are two sets of series: counters, per-rule series and histograms alike.
func TestWithAttributesTellsControllersApart(t *testing.T) {
	r, mp := newReader(t)
	api, jobs := newController(t, nil), newController(t, nil)
	ma, err := otelshed.New(mp, api, otelshed.WithAttributes(attribute.String("sluice.controller", "api")))
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Unregister()
	mj, err := otelshed.New(mp, jobs, otelshed.WithAttributes(attribute.String("sluice.controller", "jobs")))
	if err != nil {
		t.Fatal(err)
	}
	defer mj.Unregister()
	for _, c := range []*shed.Controller{api, api, jobs} {
		if d, tok := decide(t, c, "198.51.100.1"); d.Allowed {
			tok.Done(shed.Success)
		}
	}
	mj.ObserveDecision(shed.Admitted, 0)

	samples := gather(t, r)
	expect(t, samples, "two controllers", `
		sluice.dry_run.rejections{sluice.controller=api} 0
		sluice.dry_run.rejections{sluice.controller=jobs} 0
		sluice.rule.limit{sluice.controller=api,sluice.rule.name=inflight} 1
		sluice.rule.limit{sluice.controller=api,sluice.rule.name=per-ip} 2
		sluice.rule.limit{sluice.controller=jobs,sluice.rule.name=inflight} 1
		sluice.rule.limit{sluice.controller=jobs,sluice.rule.name=per-ip} 2
		sluice.decision.duration{sluice.controller=jobs,sluice.outcome=admitted} 0
	`, "sluice.dry_run.rejections", "sluice.rule.limit", "sluice.decision.duration")
	decisions := render(samples, "sluice.rule.decisions")
	for _, line := range []string{
		"sluice.rule.decisions{sluice.controller=api,sluice.outcome=allowed,sluice.rule.name=per-ip} 2",
		"sluice.rule.decisions{sluice.controller=jobs,sluice.outcome=allowed,sluice.rule.name=per-ip} 1",
	} {
		if !strings.Contains(decisions, line) {
			t.Errorf("missing %s in\n%s", line, decisions)
		}
	}
}

func TestWithAttributesRejectsWhatWouldCollide(t *testing.T) {
	c := newController(t, nil)
	for name, o := range map[string]otelshed.Option{
		"none":        otelshed.WithAttributes(),
		"invalid":     otelshed.WithAttributes(attribute.KeyValue{}),
		"own key":     otelshed.WithAttributes(attribute.String("sluice.rule.name", "x")),
		"outcome":     otelshed.WithAttributes(attribute.String("sluice.outcome", "x")),
		"given twice": otelshed.WithAttributes(attribute.String("a", "1"), attribute.String("a", "2")),
		"nil":         nil,
	} {
		if m, err := otelshed.New(noop.NewMeterProvider(), c, o); err == nil || m != nil || !strings.HasPrefix(err.Error(), "otelshed: ") {
			t.Errorf("%s: %v, %v; want an otelshed error", name, m, err)
		}
	}
	// Two options with one key each add up; the same key in both does not.
	a, b := attribute.String("a", "1"), attribute.String("b", "2")
	if _, err := otelshed.New(noop.NewMeterProvider(), c, otelshed.WithAttributes(a), otelshed.WithAttributes(b)); err != nil {
		t.Errorf("two options: %v", err)
	}
	if _, err := otelshed.New(noop.NewMeterProvider(), c, otelshed.WithAttributes(a), otelshed.WithAttributes(a)); err == nil {
		t.Error("one key in two options: no error")
	}
}
