package concurrency

import (
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/shard"
)

// ShardedOption configures NewShardedSemaphore. It is the same type as
// ratelimit.ShardedOption, so either package's WithShardCount serves both.
type ShardedOption = shard.Option

// WithShardCount sets the number of shard-local caches, a power of two. The
// default is four times the power of two at or above GOMAXPROCS, so that
// callers picking a shard at random rarely meet on one.
func WithShardCount(n int) ShardedOption { return shard.WithCount(n) }

// shardCount validates opts and returns the number of shards they ask for.
func shardCount(opts []ShardedOption) (int, error) {
	n, _, err := shard.Count("concurrency", opts)
	return n, err
}

// pickShard returns the calling goroutine's shard below mask+1 (see
// shard.Pick: the round trip of one frame stays on one shard).
func pickShard(mask uint64) uint64 { return shard.Pick(mask) }

// counterShard is one shard-local cache word on a cache line of its own, so
// that callers on different shards never write the same line.
type counterShard struct {
	n atomic.Int64
	_ [cacheLine - 8]byte
}
