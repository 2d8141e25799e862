package concurrency

import (
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
// shards, and one goroutine mostly lands on the same shard for its acquire
// and its release, keeping the round trip on one cache line. It costs a
// multiply, about half of math/rand/v2's per-thread generator measured on
// the development machine, and needs no go:linkname. A stack that grows
// (and is copied) or a deeper call just moves the goroutine to another
// shard, which is harmless.
func pickShard(mask uint64) uint64 {
	var here byte
	sp := uint64(uintptr(unsafe.Pointer(&here)))
	// 2^13 is the smallest stack; a Fibonacci multiply spreads stack
	// addresses over the high bits.
	return (sp >> 13 * 0x9e3779b97f4a7c15 >> 40) & mask
}
