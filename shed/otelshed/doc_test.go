package otelshed_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/otelshed"
	"github.com/sluicehq/sluice/store"
)

// row is one row of the metric table in the package doc.
type row struct {
	otel, prom, kind, unit string
	attrs                  []string // OTel attribute keys
	labels                 []string // Prometheus labels
}

var (
	attrKey  = regexp.MustCompile(`sluice\.[a-z_.]+`)
	promLbl  = regexp.MustCompile(`\(([a-z_]+)\)`)
	promDesc = regexp.MustCompile(`NewDesc\("(\w+)",\s*"(?:[^"\\]|\\.)*",\s*(?:nil|\[\]string\{([^}]*)\})`)
)

// table parses the metric table of doc.go.
func table(t *testing.T) []row {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var rows []row
	for line := range strings.SplitSeq(string(src), "\n") {
		cells := strings.Split(strings.TrimPrefix(line, "//\t"), "|")
		if !strings.HasPrefix(line, "//\t| ") || len(cells) != 8 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[1] == "OTel" || strings.HasPrefix(cells[1], "---") {
			continue
		}
		r := row{otel: cells[1], prom: cells[2], kind: cells[3], unit: cells[4], attrs: attrKey.FindAllString(cells[5], -1)}
		for _, m := range promLbl.FindAllStringSubmatch(cells[5], -1) {
			r.labels = append(r.labels, m[1])
		}
		slices.Sort(r.attrs)
		slices.Sort(r.labels)
		rows = append(rows, r)
	}
	if len(rows) < 10 {
		t.Fatalf("the table in doc.go has %d rows", len(rows))
	}
	return rows
}

// The table names every instrument this package makes, with its kind, unit
// and attribute keys, and nothing else: a scenario in which every metric
// applies (a store that reports its health and tables, a penalty box, a
// concurrency rule, the Observer fed) must show exactly the table's rows.
func TestTableDescribesEveryInstrument(t *testing.T) {
	r, mp := newReader(t)
	h := store.Health{Instances: 2, Share: 0.5}
	// A bucket that could make requests wait for their slot (and never
	// has to here) shows the rate wait metrics.
	paced := shed.Rule{Name: "paced", Algorithm: shed.TokenBucket, Limit: 1000, Rate: ratelimit.Per(1000, time.Second),
		MaxWait: time.Millisecond}
	// Default, whose queue bound shows the bound's gauge, with room for
	// every attempt of the scenario.
	c := newController(t, healthyStore{store.NewMemory(), h}, paced, defaultRule(t, adaptive.WithInitialLimit(100)))
	m, err := otelshed.New(mp, c)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()
	drive(t, c, func() {})
	fakeController{m}.run()

	type got struct {
		kind, unit string
		attrs      []string
	}
	seen := map[string]*got{}
	for _, s := range gather(t, r) {
		g := seen[s.name]
		if g == nil {
			g = &got{kind: s.kind, unit: s.unit}
			seen[s.name] = g
		}
		for _, kv := range s.attrs.ToSlice() {
			if !slices.Contains(g.attrs, string(kv.Key)) {
				g.attrs = append(g.attrs, string(kv.Key))
			}
		}
	}
	documented := 0
	for _, row := range table(t) {
		if row.otel == "-" {
			continue
		}
		documented++
		g := seen[row.otel]
		if g == nil {
			t.Errorf("%s: documented, not exported", row.otel)
			continue
		}
		slices.Sort(g.attrs)
		if g.kind != row.kind || g.unit != row.unit || !slices.Equal(g.attrs, row.attrs) {
			t.Errorf("%s: exported as %s, unit %q, attributes %v; documented as %s, %q, %v",
				row.otel, g.kind, g.unit, g.attrs, row.kind, row.unit, row.attrs)
		}
		delete(seen, row.otel)
	}
	for name := range seen {
		t.Errorf("%s: exported, not in the table", name)
	}
	if documented == 0 {
		t.Fatal("no OTel rows")
	}
}

// The table's Prometheus column names every metric shed/promshed defines,
// with its labels, and nothing else; counters and only counters end in
// _total. (The descriptors are read from promshed's source, which this
// package must not import.)
func TestTableNamesEveryPromshedMetric(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "promshed", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string][]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range promDesc.FindAllStringSubmatch(string(src), -1) {
			var labels []string
			for l := range strings.SplitSeq(m[2], ",") {
				if l = strings.Trim(strings.TrimSpace(l), `"`); l != "" {
					labels = append(labels, l)
				}
			}
			slices.Sort(labels)
			defined[m[1]] = labels
		}
	}
	if len(defined) < 10 {
		t.Fatalf("found %d promshed descriptors", len(defined))
	}
	for _, row := range table(t) {
		if row.prom == "-" {
			continue
		}
		labels, ok := defined[row.prom]
		if !ok {
			t.Errorf("%s: documented, not defined in promshed", row.prom)
			continue
		}
		if !slices.Equal(labels, row.labels) {
			t.Errorf("%s: labels %v, documented %v", row.prom, labels, row.labels)
		}
		if strings.HasSuffix(row.prom, "_total") != (row.kind == "counter") {
			t.Errorf("%s: documented as a %s", row.prom, row.kind)
		}
		delete(defined, row.prom)
	}
	for name := range defined {
		t.Errorf("%s: defined in promshed, not in the table", name)
	}
}
