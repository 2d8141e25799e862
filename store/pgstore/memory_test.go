package pgstore_test

import (
	"testing"

	"github.com/sluicehq/sluice/store/storetest"
)

// TestDecisionsAsMemoryAtTheSameInstants: any sequence of requests decided
// on PostgreSQL gets the very decisions Memory makes when it decides the
// same requests at the instants the database reported, for every
// algorithm the store keeps, refunds of admitted requests on long windows
// between them (storetest.DecidesAsMemory).
func TestDecisionsAsMemoryAtTheSameInstants(t *testing.T) {
	storetest.DecidesAsMemory(t, "PostgreSQL", newStore(t, sharedPool(t)), true)
}

// TestHugeLimitsAndWindowsDecideAsMemory: at the largest limits, windows
// and costs a Spec accepts, the database's arithmetic neither overflows
// (which would fail the decision) nor differs from Memory's
// (storetest.HugeDecideAsMemory).
func TestHugeLimitsAndWindowsDecideAsMemory(t *testing.T) {
	storetest.HugeDecideAsMemory(t, "PostgreSQL", newStore(t, sharedPool(t)), true)
}
