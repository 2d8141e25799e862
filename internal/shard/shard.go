// Package shard holds what the sharded primitives of concurrency
// (ShardedSemaphore) and ratelimit (ShardedWindow, ShardedBucket) share: the
// shard-count option and its validation, the choice of a caller's shard from
// its stack, and the padding unit that keeps hot words on lines of their own.
// It is internal so that neither public package has to export its helpers to
// the other, and so that the two never import each other for them.
package shard

import (
	"fmt"
	"math/bits"
	"runtime"
	"unsafe"
)

// CacheLine is the padding unit that keeps hot atomics of different
// structures off each other's cache lines (128 covers adjacent-line
// prefetching on x86 and the 128-byte lines of some arm64 parts).
const CacheLine = 128

// Option configures a sharded constructor. concurrency.ShardedOption and
// ratelimit.ShardedOption are aliases of it, so either package's
// WithShardCount serves both.
type Option interface{ apply(*config) }

type config struct {
	shards int // 0: default
}

type countOption int

func (n countOption) apply(c *config) { c.shards = int(n) }

// WithCount sets the number of shards, a power of two between 1 and 65536;
// 0 asks for the default count.
func WithCount(n int) Option { return countOption(n) }

// Count returns the number of shards opts ask for, and whether any of them
// is a WithCount (the last one wins). The default is four times the power of two at
// or above GOMAXPROCS, so that callers picking a shard at random rarely meet
// on one. It returns an error, whose text starts with pkg and a colon, for a
// nil option or a count that is not a power of two between 1 and 65536.
func Count(pkg string, opts []Option) (n int, set bool, err error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			return 0, false, fmt.Errorf("%s: nil ShardedOption", pkg)
		}
		if _, ok := o.(countOption); ok {
			set = true
		}
		o.apply(&cfg)
	}
	n = cfg.shards
	if n == 0 {
		return 4 << bits.Len(uint(max(1, runtime.GOMAXPROCS(0))-1)), set, nil
	}
	if n < 0 || n&(n-1) != 0 || n > 1<<16 {
		return 0, false, fmt.Errorf("%s: shard count must be a power of two between 1 and 65536, got %d", pkg, n)
	}
	return n, set, nil
}

// Pick returns a shard index below mask+1 from the address of the
// calling goroutine's stack: different goroutines have different stacks, so
// goroutines running at once on different cores mostly land on different
// shards, and one goroutine lands on the same shard for its acquire and its
// release when it makes them at about the same stack depth, keeping the
// round trip on one cache line. It costs a shift and two multiplies and
// needs no go:linkname. A stack that grows (and is copied), or calls made
// on either side of a 2 KiB boundary of the stack, just move the goroutine
// to another shard, which is harmless.
//
// Per-P alternatives measured on the development machine cost more than
// concurrency.Semaphore's whole round trip: a sync.Pool Get plus Put of a shard token
// took about 22 ns (and a round trip needs two), math/rand/v2 about 11 ns
// per draw (and a draw per call would split the round trip).
func Pick(mask uint64) uint64 {
	var here byte
	return ofStack(uintptr(unsafe.Pointer(&here)), mask)
}

// ofStack maps a stack address to a shard index below mask+1. Goroutine
// stacks are 2 KiB blocks at least, so sp>>11 numbers the block, and two
// goroutines' stacks never share one (an 8 KiB unit, used before, put the
// four 2 KiB stacks of a block, which goroutines started together often
// get, on one shard). Fibonacci hashing (multiply by 2^64/phi, keep the top
// bits) spreads neighbouring blocks farthest apart: any (mask+1)/4 adjacent
// 2 KiB stacks land on distinct shards, so with the default shard count any
// GOMAXPROCS goroutines on adjacent stacks do; stacks far apart meet about
// as often as under a random choice, once in mask+1.
func ofStack(sp uintptr, mask uint64) uint64 {
	h := uint64(sp>>11) * 0x9e3779b97f4a7c15
	// The top 32 bits scaled to [0, mask+1): the top bits of h, for a
	// power-of-two shard count, without a variable shift.
	return (h >> 32) * (mask + 1) >> 32
}
