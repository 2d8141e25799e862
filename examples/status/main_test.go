package main

import (
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSelfTest(t *testing.T) {
	reps, err := selfTest(io.Discard, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	first, last := reps[0], reps[1]
	if len(last.Rules) != 2 || last.Rules[0].Name != "per-user" || last.Rules[1].Name != "api" {
		t.Fatalf("rules %+v", last.Rules)
	}
	if last.Totals.Admitted <= first.Totals.Admitted {
		t.Errorf("admitted %d at the start, %d at the end: the load did not show", first.Totals.Admitted, last.Totals.Admitted)
	}
	if last.Samples < 2 || last.Rates.Admitted == nil {
		t.Errorf("%d samples, admitted rate %v: Run did not sample", last.Samples, last.Rates.Admitted)
	}
	if last.Penalty == nil || last.Store != nil {
		t.Errorf("penalty %v, store %v: want the box's table and no store health (memory)", last.Penalty, last.Store)
	}
	if !last.Rules[1].Concurrent || len(last.Rules[1].History) != last.Samples {
		t.Errorf("api: concurrent %v, %d points of %d samples", last.Rules[1].Concurrent, len(last.Rules[1].History), last.Samples)
	}
}
