package concurrency

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
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

// pickShard returns a random shard index below mask+1. math/rand/v2's
// top-level generator is per-thread and lock-free: callers running at the
// same time on different threads almost always land on different shards.
func pickShard(mask uint64) uint64 { return rand.Uint64() & mask }
