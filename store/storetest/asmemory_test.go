package storetest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// fatalRecorder is a storetest.TB whose Fatalf records the failure and
// stops the helper by panicking with it.
type fatalRecorder struct{ msg string }

func (*fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

// decideAsMemory runs storetest.DecideAsMemory and returns its failure.
func decideAsMemory(s store.Store, req *store.Request, m *store.Memory, mreq *store.Request) (msg string) {
	r := new(fatalRecorder)
	defer func() {
		if v := recover(); v != nil && v != r {
			panic(v)
		}
		msg = r.msg
	}()
	storetest.DecideAsMemory(r, "the remote", s, req, m, mreq)
	return ""
}

// TestDecideAsMemoryFailsOnAnyDifference: two stores that decide alike
// pass at every instant; a Remaining apart fails, naming the backend.
func TestDecideAsMemoryFailsOnAnyDifference(t *testing.T) {
	spec := store.Spec{Name: "q", Algorithm: store.FixedWindow, Limit: 5, Window: time.Hour}
	same, m := store.NewMemory(), store.NewMemory()
	sid, mid := storetest.MustRegister(t, same, spec), storetest.MustRegister(t, m, spec)
	for i := range 7 {
		var req, mreq store.Request
		req.Now = int64(i) * int64(time.Minute)
		req.Add(sid, "k", 1)
		mreq.Add(mid, "k", 1)
		if msg := decideAsMemory(same, &req, m, &mreq); msg != "" {
			t.Fatalf("alike stores failed at step %d: %s", i, msg)
		}
	}
	spec.Limit = 6
	other := store.NewMemory()
	oid := storetest.MustRegister(t, other, spec)
	var req, mreq store.Request
	req.Add(oid, "k", 1)
	mreq.Add(mid, "k", 1)
	if msg := decideAsMemory(other, &req, m, &mreq); !strings.Contains(msg, "the remote") {
		t.Fatalf("a store with another limit passed (%q)", msg)
	}
}
