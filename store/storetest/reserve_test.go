package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// TestReserveHoldsWhenTheHourEndsDuringTheWait: the reserve test decides
// its all-or-nothing step's window hit some 40 s after now, when the
// reservation before it starts. A store on a server's clock (redisstore)
// ran it in the minute before a full hour, where the one-hour window
// rolled over during the wait and the request was admitted; a store on
// the caller's clock does the same at such a now.
func TestReserveHoldsWhenTheHourEndsDuringTheWait(t *testing.T) {
	for _, alg := range []store.Algorithm{store.TokenBucket, store.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			now := int64(500*time.Hour - 13*time.Second)
			testReserve(&harness{t: t, s: store.NewMemory(), now: now}, alg)
		})
	}
}
