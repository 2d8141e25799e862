package sqlquota

import (
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// TestBucketParamIsGCRAsInterval: a token bucket's parameter is the
// emission interval of ratelimit.GCRA for its rate (Per/Count rounded
// up), so the database refills exactly as store.Memory does.
func TestBucketParamIsGCRAsInterval(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		count := rapid.Int64Range(1, 1e6).Draw(t, "count")
		per := time.Duration(rapid.Int64Range(count, int64(1000*time.Hour)).Draw(t, "per"))
		rate := ratelimit.Per(count, per)
		spec := store.Spec{Name: "b", Algorithm: store.TokenBucket, Limit: 1, Rate: rate}
		if spec.Validate() != nil {
			t.Skip("not a valid spec")
		}
		l, err := NewLimit(spec, "test", false)
		if err != nil {
			t.Fatal(err)
		}
		g, err := ratelimit.NewGCRA(rate, 1)
		if err != nil {
			t.Fatal(err)
		}
		if l.Kind != KindBucket || l.Param != int64(g.Interval()) {
			t.Fatalf("kind %d param %d, GCRA's interval %d", l.Kind, l.Param, g.Interval())
		}
	})
}

// TestWindowParamIsTheCalendarsSpan: a window's parameter is the span of
// its calendar's window clock, and sliding windows are kept only where the
// store says so; other algorithms are an error naming the backend.
func TestWindowParamIsTheCalendarsSpan(t *testing.T) {
	fixed := store.Spec{Name: "f", Algorithm: store.FixedWindow, Limit: 5, Window: 24 * time.Hour}
	l, err := NewLimit(fixed, "test", false)
	if err != nil || l.Kind != KindFixed || l.Param != int64(fixed.Calendar.Clock(fixed.Window).Span()) {
		t.Fatalf("fixed window: %+v, %v", l, err)
	}
	sliding := fixed
	sliding.Algorithm = store.SlidingWindow
	if l, err := NewLimit(sliding, "test", true); err != nil || l.Kind != KindSliding {
		t.Fatalf("sliding window where kept: %+v, %v", l, err)
	}
	if _, err := NewLimit(sliding, "Test", false); err == nil || !strings.HasPrefix(err.Error(), "store: ") || !strings.Contains(err.Error(), "the Test store keeps token buckets and fixed windows") {
		t.Fatalf("sliding window where not kept: %v", err)
	}
	logSpec := store.Spec{Name: "l", Algorithm: store.SlidingLog, Limit: 5, Window: time.Minute}
	if _, err := NewLimit(logSpec, "Test", true); err == nil || !strings.Contains(err.Error(), "the Test store keeps token buckets, fixed and sliding windows") {
		t.Fatalf("sliding log: %v", err)
	}
}
