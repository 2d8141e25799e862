package main

import (
	"math"
	"strings"
	"testing"
)

// recordedCPUCell is sluice's Default at 5x on the CPU endpoint as a quiet
// run recorded it (capacity 925 req/s, 0.92 of the core over a 2 s phase,
// 215 µs of CPU per request that reached the server, 0.87 shed), with
// 1,110 of its 8,560 requests running the work.
func recordedCPUCell(scenario string) cell {
	return cell{
		Scenario: scenario, Contender: "sluice", Multiple: 5, Rate: 4625,
		Load:   loadResult{Sent: 9250, WindowS: 1.5, Good: 874, Shed: 7000},
		Server: serverStats{UserUS: 1_500_000, SysUS: 340_000, Requests: 8560, Worked: 1110, GOMAXPROCS: 1},
	}
}

// TestBudgetOfARecordedCellSitsNearItsGoodput: r is the CPU left once each
// of the 1,110 admitted requests is taken at w = 1/925 s (1.2 s in all),
// over the 7,450 that did not run the work; the ceiling solves x*w +
// (λ-x)*r = 1 s a second.
func TestBudgetOfARecordedCellSitsNearItsGoodput(t *testing.T) {
	b := budgetOf(recordedCPUCell("cpu"), 925, 0)
	if b == nil {
		t.Fatal("no budget for a CPU cell where 87% did not run the work")
	}
	if r := 640_000.0 / 7450; math.Abs(b.NoWorkUS-r) > 1e-9 {
		t.Errorf("r = %v µs, want (1,840,000 - 1,200,000) / 7,450 = %v", b.NoWorkUS, r)
	}
	// x = (1 - 4625 * 85.906e-6) / (1/925 - 85.906e-6) = 605.6 req/s.
	if math.Abs(b.Ceiling-0.6547) > 1e-4 {
		t.Errorf("ceiling %v, want 605.6/925 = 0.6547", b.Ceiling)
	}
	// The same cell on two CPUs at twice the rate and capacity: the same
	// share.
	c := recordedCPUCell("mixed")
	c.Rate, c.Server = 9250, serverStats{UserUS: 3_000_000, SysUS: 680_000, Requests: 17120, Worked: 2220, GOMAXPROCS: 2}
	if b2 := budgetOf(c, 1850, 0); b2 == nil || math.Abs(b2.NoWorkUS-b.NoWorkUS) > 1e-9 || math.Abs(b2.Ceiling-b.Ceiling) > 1e-9 {
		t.Errorf("on two CPUs: %+v, want %+v", b2, b)
	}
}

// TestBudgetOfLimitsAndBlanks: the ceiling stays within [0, min(1,
// λ/capacity)]; shedding that costs as much as the work leaves admitting
// every arrival; no budget where under 5% did not run the work, for a
// failed cell or for a scenario that is not CPU-bound.
func TestBudgetOfLimitsAndBlanks(t *testing.T) {
	c := recordedCPUCell("cpu")
	c.Rate = 18_500 // 20x: λr > 1 s a second, the answers alone eat the core
	if b := budgetOf(c, 925, 0); b == nil || b.Ceiling != 0 {
		t.Errorf("at 20x: %+v, want ceiling 0", b)
	}
	c.Rate = 462.5 // 0.5x: everything that arrives fits
	if b := budgetOf(c, 925, 0); b == nil || b.Ceiling != 0.5 {
		t.Errorf("at 0.5x: %+v, want ceiling 0.5", b)
	}
	c = recordedCPUCell("cpu")
	c.Server.UserUS = 12_000_000 // r well above w
	if b := budgetOf(c, 925, 0); b == nil || b.NoWorkUS <= 1e6/925 || b.Ceiling != 1 {
		t.Errorf("shedding dearer than the work: %+v, want r > w and ceiling 1", b)
	}
	c = recordedCPUCell("cpu")
	c.Server.Worked = c.Server.Requests - 400 // 4.7% did not run the work
	if b := budgetOf(c, 925, 0); b != nil {
		t.Errorf("400 of 8,560 not run: %+v, want none", b)
	}
	c.Server.Worked = c.Server.Requests - 428 // 5%
	if b := budgetOf(c, 925, 0); b == nil {
		t.Error("428 of 8,560 not run: no budget, want one")
	}
	c = recordedCPUCell("cpu")
	c.Err = "overload: no \"ready \""
	if b := budgetOf(c, 925, 0); b != nil {
		t.Errorf("a failed cell: %+v, want none", b)
	}
	if b := budgetOf(recordedCPUCell("io"), 925, 0); b != nil {
		t.Errorf("an io cell: %+v, want none", b)
	}
}

// TestCPUTableShowsTheBudgetColumns: the cpu table has µs/no and ceiling,
// the io table has not.
func TestCPUTableShowsTheBudgetColumns(t *testing.T) {
	cpu := scenario{name: "cpu", multiples: []float64{5}, capacity: 925}
	io := scenario{name: "io", multiples: []float64{5}, capacity: 100}
	rep := &report{
		Config:     map[string]string{"duration": "2s", "warmup": "500ms"},
		contenders: []string{"sluice"},
		scenarios:  []scenario{cpu, io},
		Cells:      []cell{recordedCPUCell("cpu"), fakeCell("sluice", 0, 40, 30_000, 10)},
	}
	table := tableOf(rep)
	if !strings.Contains(table, "| srv core | µs/no | ceiling |") || !strings.Contains(table, "| 0.92 | 86 | 0.65 |\n") {
		t.Errorf("the cpu table lacks its budget:\n%s", table)
	}
	if strings.Count(table, "µs/no | ceiling") != 1 {
		t.Errorf("want the budget columns in the cpu table only:\n%s", table)
	}
}

// TestBudgetOfTakesTheMeasuredWorkCost: with the calibration's own CPU per
// request (1,000 µs here, below 1/capacity because the calibration's
// server did not use all of its core), r and the ceiling are worked out at
// that w, and the budget says which w it took.
func TestBudgetOfTakesTheMeasuredWorkCost(t *testing.T) {
	b := budgetOf(recordedCPUCell("cpu"), 925, 1000)
	if b == nil {
		t.Fatal("no budget")
	}
	r := (1_840_000.0 - 1110*1000) / 7450
	if b.WorkUS != 1000 || math.Abs(b.NoWorkUS-r) > 1e-9 {
		t.Errorf("w %v, r %v; want 1000 and %v", b.WorkUS, b.NoWorkUS, r)
	}
	x := (1e6 - 4625*r) / (1000 - r)
	if want := x / 925; math.Abs(b.Ceiling-want) > 1e-9 {
		t.Errorf("ceiling %v, want %v", b.Ceiling, want)
	}
	if d := budgetOf(recordedCPUCell("cpu"), 925, 0); d.WorkUS != 1e6/925 {
		t.Errorf("unmeasured: w %v, want 1/capacity = %v µs", d.WorkUS, 1e6/925)
	}
}
