package sim

import (
	"encoding/csv"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReportFiles(t *testing.T) {
	reports, err := RunStandard([]string{"overload2x"}, []string{"none", "sluice"}, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 2 {
		t.Fatalf("%d reports", len(reports))
	}
	line := reports[1].Line()
	for _, key := range []string{"scenario=overload2x ", "controller=sluice ", "goodput=", "p50_ms=", "p99_ms=", "shed=", "settle_s="} {
		if !strings.Contains(line, key) {
			t.Errorf("line %q lacks %q", line, key)
		}
	}
	dir := t.TempDir()
	if err := WriteCSVFiles(dir, reports); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "overload2x_sluice.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(reports[1].Series)+1 || len(rows[0]) != 9 {
		t.Fatalf("csv has %d rows of %d columns", len(rows), len(rows[0]))
	}
	if err := WriteSVGFiles(dir, reports); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "overload2x.svg"))
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(strings.NewReader(string(svg)))
	lines := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("svg is not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 4*2 {
		t.Fatalf("%d polylines, want 4 panels x 2 controllers", lines)
	}
}

func TestCustomFactoryJoinsTheComparison(t *testing.T) {
	specs, err := StandardScenarios([]string{"overload2x"}, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	specs[0].Duration = 5 * time.Second
	fifoFactory := Factory{"fifo20ms", func(Scenario, uint64) (Controller, error) {
		return &fifo{limit: StdWorkers, maxWait: 20 * time.Millisecond}, nil
	}}
	std, err := StandardFactories([]string{"sluice"}, specs, 1)
	if err != nil {
		t.Fatal(err)
	}
	reports, err := RunFactories(specs, append(std, fifoFactory), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 2 || reports[1].Controller != "fifo20ms" || reports[1].Goodput < 0.9 {
		t.Fatalf("reports: %+v", reports)
	}
	if _, err := StandardFactories([]string{"nope"}, specs, 1); err == nil {
		t.Fatal("unknown controller accepted")
	}
}

func TestReportLineQueueingFields(t *testing.T) {
	specs, err := StandardScenarios([]string{"overload2x", "critical3x"}, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range specs {
		specs[i].Duration = 5 * time.Second
	}
	factories, err := StandardFactories([]string{"sluice", "priority"}, specs, 1)
	if err != nil {
		t.Fatal(err)
	}
	reports, err := RunFactories(specs, factories, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		line := r.Line()
		waits := r.Controller == "priority"
		mixed := r.Scenario == "critical3x"
		for key, want := range map[string]bool{" p99_wait_ms=": waits, " critical_goodput=": mixed, " sheddable_goodput=": mixed} {
			if strings.Contains(line, key) != want {
				t.Errorf("%q: has %q is %v, want %v", line, key, !want, want)
			}
		}
	}
}
