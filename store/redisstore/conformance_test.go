package redisstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/redisstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// conformanceWait is the harness's longest real wait per test: windows and
// lease TTLs of a quarter of it.
const conformanceWait = 400 * time.Millisecond

// skipUnsound skips the one harness check that does not hold on a server
// clock: limit/sliding_window asserts RetryAfter <= the window, but a
// sliding-window counter that is full early in its window admits again
// only once the previous window's weight has decayed, up to 2 windows
// later (the harness's own retry test allows 2). Under a controlled clock
// the harness's fixed now happens to lie late enough in its window; on
// Redis's clock it lies anywhere. TestSlidingWindowRetryBound checks the
// true bound instead.
func skipUnsound(t *testing.T, body func(t *testing.T)) {
	if strings.HasSuffix(t.Name(), "/limit/sliding_window") {
		t.Skip("harness bound RetryAfter <= window does not hold for a sliding window on a server clock; see TestSlidingWindowRetryBound")
	}
	body(t)
}

// TestConformance runs the store conformance harness on the shared Redis,
// each subtest under a prefix of its own.
func TestConformance(t *testing.T) {
	c := sharedClient(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := redisstore.New(c, redisstore.WithPrefix(testPrefix(t, c)), redisstore.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.WithServerTime(conformanceWait), storetest.WithWrapper(skipUnsound))
}
