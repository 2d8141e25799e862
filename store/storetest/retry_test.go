package storetest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store/storetest"
)

// TestRetryDoublingDoublesTheDeadlineUntilATryShowsTheCase: each try gets
// its number and twice the last one's deadline, the tries stop at the
// first that shows the case, and its deadline is returned.
func TestRetryDoublingDoublesTheDeadlineUntilATryShowsTheCase(t *testing.T) {
	var seen []string
	got := storetest.RetryDoubling(t, 4, 10*time.Millisecond, func(n int, timeout time.Duration) string {
		seen = append(seen, fmt.Sprintf("%d:%v", n, timeout))
		if n < 3 {
			return "too slow"
		}
		return ""
	})
	if fmt.Sprint(seen) != "[1:10ms 2:20ms 3:40ms]" || got != 40*time.Millisecond {
		t.Fatalf("tries %v, returned %v", seen, got)
	}
}
