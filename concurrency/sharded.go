package concurrency

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// ShardedOption configures NewShardedSemaphore and NewShardedWindow.
type ShardedOption interface{ applySharded(*shardedConfig) }

type shardedConfig struct {
	shards int // 0: default
}

type shardCountOption int

func (n shardCountOption) applySharded(c *shardedConfig) { c.shards = int(n) }

// WithShardCount sets the number of shard-local caches, a power of two. The
// default is four times the power of two at or above GOMAXPROCS, so that
// callers picking a shard at random rarely meet on one.
func WithShardCount(n int) ShardedOption { return shardCountOption(n) }

func shardCount(opts []ShardedOption) (int, error) {
	var cfg shardedConfig
	for _, o := range opts {
		if o == nil {
			return 0, errors.New("concurrency: nil ShardedOption")
		}
		o.applySharded(&cfg)
	}
	n := cfg.shards
	if n == 0 {
		return 4 << bits.Len(uint(max(1, runtime.GOMAXPROCS(0))-1)), nil
	}
	if n < 0 || n&(n-1) != 0 || n > 1<<16 {
		return 0, fmt.Errorf("concurrency: shard count must be a power of two between 1 and 65536, got %d", n)
	}
	return n, nil
}

// counterShard is one shard-local cache word on a cache line of its own, so
// that callers on different shards never write the same line.
type counterShard struct {
	n atomic.Int64
	_ [cacheLine - 8]byte
}

// pickShard returns a shard index below mask+1 from the address of the
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
// Semaphore's whole round trip: a sync.Pool Get plus Put of a shard token
// took about 22 ns (and a round trip needs two), math/rand/v2 about 11 ns
// per draw (and a draw per call would split the round trip).
func pickShard(mask uint64) uint64 {
	var here byte
	return shardOf(uintptr(unsafe.Pointer(&here)), mask)
}

// shardOf maps a stack address to a shard index below mask+1. Goroutine
// stacks are 2 KiB blocks at least, so sp>>11 numbers the block, and two
// goroutines' stacks never share one (an 8 KiB unit, used before, put the
// four 2 KiB stacks of a block, which goroutines started together often
// get, on one shard). Fibonacci hashing (multiply by 2^64/phi, keep the top
// bits) spreads neighbouring blocks farthest apart: any (mask+1)/4 adjacent
// 2 KiB stacks land on distinct shards, so with the default shard count any
// GOMAXPROCS goroutines on adjacent stacks do; stacks far apart meet about
// as often as under a random choice, once in mask+1.
func shardOf(sp uintptr, mask uint64) uint64 {
	h := uint64(sp>>11) * 0x9e3779b97f4a7c15
	// The top 32 bits scaled to [0, mask+1): the top bits of h, for a
	// power-of-two shard count, without a variable shift.
	return (h >> 32) * (mask + 1) >> 32
}
