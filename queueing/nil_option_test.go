package queueing

import (
	"testing"

	"github.com/sluicehq/sluice/concurrency"
)

// TestNilOptionIsAnError: a nil option is a constructor error, never a
// panic.
func TestNilOptionIsAnError(t *testing.T) {
	sem, err := concurrency.NewSemaphore(4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(sem, nil); err == nil {
		t.Error("New with a nil option: no error")
	}
}
