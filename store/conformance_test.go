package store_test

import (
	"testing"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return store.NewMemory() })
}

func TestZeroMemoryConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return new(store.Memory) })
}

// TestFaultyConformance runs the harness through a Faulty with no error
// set: it must pass every call through unchanged.
func TestFaultyConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return storetest.NewFaulty(store.NewMemory()) })
}
