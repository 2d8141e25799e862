package queueing_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/queueing"
)

func ExampleQueue() {
	// One permit; at most one caller may wait for it.
	sem, _ := concurrency.NewSemaphore(1)
	q, err := queueing.New(sem, queueing.WithMaxLength(1), queueing.WithMaxWait(time.Second))
	if err != nil {
		panic(err)
	}
	defer q.Close()
	ctx := context.Background()

	fmt.Println("first:", q.Acquire(ctx, 1))
	served := make(chan error)
	go func() { served <- q.Acquire(ctx, 1) }()
	for q.Len() == 0 { // wait until the second caller is queued
		runtime.Gosched()
	}
	err = q.Acquire(ctx, 1)
	fmt.Println("third:", err, "- shed:", errors.Is(err, queueing.ErrShed))

	q.Release(1) // handed straight to the waiter
	fmt.Println("second:", <-served)
	q.Release(1)
	fmt.Println("inflight:", sem.Inflight())
	// Output:
	// first: <nil>
	// third: queueing: queue full - shed: true
	// second: <nil>
	// inflight: 0
}

func ExampleQueue_Lane() {
	// Keep 20% of ten permits for critical work.
	sem, _ := concurrency.NewSemaphore(10)
	q, _ := queueing.New(sem, queueing.WithReserve(0.2, queueing.Critical))
	defer q.Close()
	batch, _ := q.Lane(queueing.Sheddable, "")
	checkout, _ := q.Lane(queueing.CriticalPlus, "")

	n := 0
	for batch.TryAcquire(1) {
		n++
	}
	fmt.Println("sheddable work got", n, "permits")
	fmt.Println("critical work still admitted:", checkout.TryAcquire(2))
	// Output:
	// sheddable work got 8 permits
	// critical work still admitted: true
}

func ExampleCoDel() {
	c, _ := queueing.NewCoDel(queueing.DefaultTarget, queueing.DefaultInterval)
	ms := int64(time.Millisecond)
	c.Empty(0) // the queue was empty at t=0, then filled up
	for _, now := range []int64{50 * ms, 100 * ms, 150 * ms} {
		fmt.Printf("t=%dms standing=%v timeout=%v\n", now/ms, c.Standing(now), c.Timeout(now))
	}
	c.Empty(150 * ms) // it drained
	fmt.Println("after draining:", c.Timeout(150*ms))
	// Output:
	// t=50ms standing=false timeout=100ms
	// t=100ms standing=true timeout=5ms
	// t=150ms standing=true timeout=5ms
	// after draining: 100ms
}

func ExamplePacer() {
	// Three calls a second to a fragile gateway, evenly spaced.
	p, _ := queueing.NewPacer(3, time.Second)
	now := int64(1) << 40 // any monotonic instant, e.g. from a simulator
	for range 4 {
		fmt.Println(time.Duration(p.ReserveAt(now) - now))
	}
	// Output:
	// 0s
	// 333.333333ms
	// 666.666666ms
	// 1s
}

func ExampleShare() {
	// Of a queue of 90, the lowest classes may fill only part.
	for _, p := range []queueing.Priority{queueing.Sheddable, queueing.SheddablePlus, queueing.Critical} {
		fmt.Println(p, queueing.Share(p, 90))
	}
	// Output:
	// sheddable 30
	// sheddable-plus 60
	// critical 90
}

func ExampleWithFairShare() {
	// Four permits shared by tenants. "batch" borrows them all while
	// nobody else asks; when "web" comes, the next permit freed is its.
	sem, _ := concurrency.NewSemaphore(4)
	q, err := queueing.New(sem, queueing.WithFairShare())
	if err != nil {
		panic(err)
	}
	defer q.Close()
	base, _ := q.Lane(queueing.Critical, "")
	batch, _ := base.Tenant("batch", 1)
	web, _ := base.Tenant("web", 1)
	ctx := context.Background()

	fmt.Println("batch took 4:", batch.TryAcquire(4))
	batchWaits := make(chan error)
	go func() { batchWaits <- batch.Acquire(ctx, 1) }()
	for q.Len() == 0 { // batch's fifth request waits first
		runtime.Gosched()
	}
	webWaits := make(chan error)
	go func() { webWaits <- web.Acquire(ctx, 1) }()
	for q.Len() == 1 {
		runtime.Gosched()
	}
	batch.Release(1)
	fmt.Println("web served:", <-webWaits, "- web holds", q.TenantHeld("web"), "batch holds", q.TenantHeld("batch"))
	batch.Release(1)
	fmt.Println("batch served:", <-batchWaits)
	batch.Release(3)
	web.Release(1)
	fmt.Println("inflight:", sem.Inflight(), "tenants:", q.Stats().Tenants)
	// Output:
	// batch took 4: true
	// web served: <nil> - web holds 1 batch holds 3
	// batch served: <nil>
	// inflight: 0 tenants: 0
}
