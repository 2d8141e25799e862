package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/examples/internal/demo"
)

// chromium returns the headless browser to drive: $SLUICE_CHROMIUM, or
// chromium or chromium-browser on PATH. Without one the test is skipped,
// unless SLUICE_REQUIRE_BROWSER=1 (as in CI), where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH (install the OS package: apt-get install chromium, or set SLUICE_CHROMIUM): the status page is not tested in a browser"
	if os.Getenv("SLUICE_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + ", and SLUICE_REQUIRE_BROWSER=1")
	}
	t.Skip(msg)
	return ""
}

// browse runs the headless browser on url with args and returns its
// standard output. Each run has a profile of its own and a minute at most.
func browse(t *testing.T, bin, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The closed network of a CI machine refuses Chromium's own background
	// connections (updates, sync, QUIC probes): turned off, they cost no time.
	args = append([]string{"--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
		"--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	defer func() { t.Logf("browser run: %v", time.Since(start)) }()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// field returns the integer the rendered page shows for the report field
// path (a data-f attribute), and false if the page has none.
func field(dom []byte, path string) (int64, bool) {
	m := regexp.MustCompile(`data-f="` + regexp.QuoteMeta(path) + `" data-fmt="int">(-?\d+)<`).FindSubmatch(dom)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(m[1]), 10, 64)
	return n, err == nil
}

// polls returns how many reports the page's script applied.
func polls(dom []byte) int {
	m := regexp.MustCompile(`<body data-polls="(\d+)"`).FindSubmatch(dom)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// The status page, loaded in headless Chromium while the service is under
// load, shows the rules, and its script updates the numbers from the JSON
// report within 2 s (of the browser's virtual time, which stands still
// while a fetch is in flight); a second load shows more admitted requests;
// the hot keys and penalized clients render as rows of hashed keys. Its
// screenshots are written to the test's artifact directory (a temporary
// one, kept with go test -artifacts -outputdir DIR) and their paths logged.
func TestStatusPageInChromium(t *testing.T) {
	bin := chromium(t)
	svc, err := newService()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := demo.Serve(svc.handler)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds the load
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { svc.page.Run(ctx) })
	// Mallory alone first, until she serves a penalty, so that both tables
	// have rows: beside the users, on a machine too busy for the backend
	// to serve her more than her per-user limit, the adaptive rule sheds
	// her requests (a 503 is no strike) before the per-user rule can.
	alone, stop := context.WithCancel(ctx)
	var abusing sync.WaitGroup
	for range abusers {
		abusing.Go(func() { send(alone, srv, "mallory", abuserPause) })
	}
	penalized := demo.Await(func() bool { return len(svc.page.Report().Penalized) > 0 })
	stop()
	abusing.Wait()
	if !penalized {
		rep := svc.page.Report()
		t.Fatalf("mallory was not penalized within 10 s of sending alone: totals %+v", rep.Totals)
	}
	wg.Go(func() { load(ctx, srv) })
	url := srv.URL + "/debug/sluice/"

	var admitted [2]int64
	for i := range admitted {
		// One run renders the page for 2 s, dumps its DOM and takes a
		// screenshot.
		shot := filepath.Join(t.ArtifactDir(), fmt.Sprintf("statuspage-%d.png", i+1))
		dom := browse(t, bin, url, "--dump-dom", "--screenshot="+shot, "--window-size=1200,900", "--hide-scrollbars", "--virtual-time-budget=2000")
		// The hot keys and the penalized clients are tables the script
		// rebuilds from each report: mallory's key and timeout are rows.
		for _, want := range []string{`data-rule="per-user"`, `data-rule="api"`, `id="live" class="live">live<`,
			`id="hot-keys"`, `<tr class="hot-key" data-rule="per-user" data-key="h:`, `id="penalized"`, `<tr class="penalized" data-key="h:`} {
			if !bytes.Contains(dom, []byte(want)) {
				t.Fatalf("load %d: the rendered page lacks %s:\n%s", i+1, want, dom)
			}
		}
		if n := polls(dom); n < 1 {
			t.Fatalf("load %d: the script applied %d reports in 2 s, want at least 1", i+1, n)
		}
		var ok bool
		if admitted[i], ok = field(dom, "totals.admitted"); !ok {
			t.Fatalf("load %d: no admitted total on the page", i+1)
		}
		if !regexp.MustCompile(`data-f="rules.1.chart.limit" data-fmt="points" points="[0-9.]+,[0-9.]+ `).Match(dom) {
			t.Errorf("load %d: the api rule's chart has fewer than two points", i+1)
		}
		// The adaptive rule's queue bound and its sheds for a wait, which
		// the report leaves out at zero, as the script shows them.
		if !regexp.MustCompile(`data-f="rules.1.queue_bound_seconds" data-fmt="ms">20.0 ms<`).Match(dom) ||
			!regexp.MustCompile(`data-f="rules.1.shed_by_wait" data-fmt="count">\d+<`).Match(dom) {
			t.Errorf("load %d: the api rule's queue bound or sheds by wait are not shown", i+1)
		}
		png, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10_000 {
			t.Fatalf("screenshot %s: %d bytes, not a PNG of a page", shot, len(png))
		}
		t.Logf("screenshot: %s (%d bytes)", shot, len(png))
	}
	if admitted[1] <= admitted[0] {
		t.Errorf("admitted %d, then %d: the page did not follow the load", admitted[0], admitted[1])
	}
}
