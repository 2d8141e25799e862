package concurrency_test

import (
	"fmt"

	"github.com/sluicehq/sluice/concurrency"
)

func ExampleSemaphore() {
	// At most two renders at once; a third is shed instead of queued.
	renders, err := concurrency.NewSemaphore(2)
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 3; i++ {
		fmt.Printf("request %d admitted: %v\n", i, renders.TryAcquire(1))
	}
	renders.Release(1)
	fmt.Println("after one finishes:", renders.TryAcquire(1))
	// Output:
	// request 1 admitted: true
	// request 2 admitted: true
	// request 3 admitted: false
	// after one finishes: true
}
