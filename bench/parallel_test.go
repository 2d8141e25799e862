package bench

import (
	"runtime"
	"sync"
	"testing"
)

// inParallel runs body in parallelism × GOMAXPROCS goroutines and waits for
// them: worker w (from 0) does n of the b.N iterations, split up front. It
// stands in for testing.B.RunParallel in every parallel case here, for two
// costs of the framework's that RunParallel adds to the code measured:
//   - its workers' testing.PB values are 32-byte allocations made one
//     after the other, often on one cache line, and every iteration writes
//     its worker's (pb.cache--): two cores then wrote one line on every
//     iteration, in some processes and not in others (a Decide on a Global
//     cap took 36 ns in one process and 72 in the next, the same code);
//   - its iterations come from one shared counter, taken in grains sized
//     from the run before, a few iterations a grain after the probe of
//     b.N = 1 under -benchtime Nx: an atomic add on a line both cores
//     write, every few iterations.
//
// Without RunParallel's dynamic balancing the run ends with its slowest
// worker, so a figure is never better than the cores all did.
func inParallel(b *testing.B, parallelism int, body func(w, n int)) {
	procs := max(1, parallelism) * runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range procs {
		n := b.N / procs
		if w < b.N%procs {
			n++
		}
		wg.Go(func() { body(w, n) })
	}
	wg.Wait()
}

// serialAndParallel runs body as name/serial and as name/parallel, telling
// it which.
func serialAndParallel(b *testing.B, name string, body func(b *testing.B, parallel bool)) {
	for _, parallel := range []bool{false, true} {
		mode := "/serial"
		if parallel {
			mode = "/parallel"
		}
		b.Run(name+mode, func(b *testing.B) { body(b, parallel) })
	}
}
