package concurrency_test

import (
	"fmt"

	"github.com/sluicehq/sluice/concurrency"
)

func ExampleShardedSemaphore() {
	// A global cap of 3 concurrent exports, shared by every core.
	exports, err := concurrency.NewShardedSemaphore(3)
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 4; i++ {
		fmt.Printf("export %d admitted: %v\n", i, exports.TryAcquire(1))
	}
	exports.Release(1)
	fmt.Println("inflight:", exports.Inflight(), "available:", exports.Available())
	// Output:
	// export 1 admitted: true
	// export 2 admitted: true
	// export 3 admitted: true
	// export 4 admitted: false
	// inflight: 2 available: 1
}
