package main

import (
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSelfTest: the first request of the burst is rendered; on Linux,
// where the Guard knows when each request's bytes arrived, the requests
// whose turn came past Default's queue bound are shed, each with a
// Retry-After, and the last one waited longest of all.
func TestSelfTest(t *testing.T) {
	res, err := selfTest(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.statuses) != burst {
		t.Fatalf("%d answers, want %d", len(res.statuses), burst)
	}
	if res.statuses[0] != http.StatusOK {
		t.Errorf("the first request, which waited for nothing, got %d", res.statuses[0])
	}
	for i, st := range res.statuses {
		if st != http.StatusOK && st != http.StatusServiceUnavailable {
			t.Errorf("answer %d: status %d", i, st)
		}
	}
	for i, ra := range res.retryAfter {
		if n, err := strconv.Atoi(ra); err != nil || n < 1 {
			t.Errorf("503 number %d: Retry-After %q", i, ra)
		}
	}
	if runtime.GOOS != "linux" {
		t.Skip("no arrival times here: no request is known to have waited")
	}
	if !res.arrivals {
		t.Fatalf("no answer on %d connections said how long its request waited", stampTries)
	}
	if last := res.statuses[burst-1]; last != http.StatusServiceUnavailable {
		t.Errorf("the last request, %d renders late, got %d", burst-1, last)
	}
	if res.shedByWait == 0 || res.shedByWait > uint64(len(res.retryAfter)) {
		t.Errorf("shed for the wait %d, with %d 503s", res.shedByWait, len(res.retryAfter))
	}
}
