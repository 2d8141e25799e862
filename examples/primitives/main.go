// Command primitives shows sluice's admission primitives deciding a short
// burst of work: a Semaphore that bounds inflight renders.
package main

import (
	"fmt"
	"os"

	"github.com/sluicehq/sluice/concurrency"
)

func main() {
	renders, err := concurrency.NewSemaphore(3)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("semaphore: at most 3 renders at once")
	for i := 1; i <= 5; i++ {
		ok := renders.TryAcquire(1)
		fmt.Printf("  render %d: admitted=%-5v inflight=%d/%d\n", i, ok, renders.Inflight(), renders.Limit())
	}
	renders.Release(1)
	fmt.Printf("  one render finished: inflight=%d, next admitted=%v\n", renders.Inflight(), renders.TryAcquire(1))
}
