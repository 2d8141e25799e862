package mysqlstore_test

import (
	"testing"

	"github.com/sluicehq/sluice/store/storetest"
)

// TestDecisionsAsMemoryAtTheSameInstants: any sequence of requests decided
// on MariaDB gets the very decisions Memory makes when it decides the same
// requests at the instants the database reported, for token buckets and
// fixed windows, refunds of admitted requests on long windows between them
// (storetest.DecidesAsMemory).
func TestDecisionsAsMemoryAtTheSameInstants(t *testing.T) {
	storetest.DecidesAsMemory(t, "MariaDB", newStore(t, sharedDB(t)), false)
}

// TestHugeLimitsAndWindowsDecideAsMemory: at the largest limits, windows
// and costs a Spec accepts, the database's arithmetic neither overflows
// (MariaDB fails a BIGINT overflow, which would fail the decision) nor
// differs from Memory's (storetest.HugeDecideAsMemory).
func TestHugeLimitsAndWindowsDecideAsMemory(t *testing.T) {
	storetest.HugeDecideAsMemory(t, "MariaDB", newStore(t, sharedDB(t)), false)
}
