package storetest_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestWithSkipSkipsBeforeTheStoreIsMade: a subtest whose name contains a
// part given to WithSkip never makes its store, and the others do.
func TestWithSkipSkipsBeforeTheStoreIsMade(t *testing.T) {
	var made []string
	t.Run("harness", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			made = append(made, t.Name())
			return store.NewMemory()
		}, storetest.WithSkip("not this store's", "/limit/", "/cost/", "/retry/", "/concurrent", "/all_or_nothing/",
			"/reset/", "/refund", "/reserve/", "/max_hits", "/lease/", "/unregister", "/update/", "/bad/requests"))
	})
	if len(made) != 1 || !strings.HasSuffix(made[0], "/bad/specs") {
		t.Fatalf("stores made for %q, want bad/specs alone", made)
	}
}
