package store

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"
)

// TestMemoryUnregisterFrees: once unregistered, a limit's table is
// garbage: nothing in the Memory keeps it alive.
func TestMemoryUnregisterFrees(t *testing.T) {
	m := NewMemory()
	id, err := m.Register(context.Background(), Spec{Name: "c", Algorithm: Concurrency, Limit: 3, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p := weak.Make(m.lookup(id).(*leaseTable))
	runtime.GC()
	if p.Value() == nil {
		t.Fatal("a registered limit was collected")
	}
	if err := m.Unregister(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	if p.Value() != nil {
		t.Fatal("an unregistered limit's table is still reachable")
	}
}
