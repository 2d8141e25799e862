package redisstore_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestWindowsOnTheCalendarAsMemory: a window limit on Redis (deciding on
// the server's clock) places its windows where Memory places them at the
// same instant, for every kind of calendar: the wait to the window's end
// agrees within Redis's TIME resolution of a microsecond, and one of
// rounding (storetest.WindowsAsMemory).
func TestWindowsOnTheCalendarAsMemory(t *testing.T) {
	c := sharedClient(t)
	storetest.WindowsAsMemory(t, "Redis", func(t *testing.T) store.Store { return newStore(t, c, testPrefix(t, c)) }, 2*time.Microsecond)
}
