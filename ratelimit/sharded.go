package ratelimit

import "github.com/sluicehq/sluice/internal/shard"

// cacheLine is the padding unit that keeps hot atomics of different
// structures off each other's cache lines.
const cacheLine = shard.CacheLine

// ShardedOption configures NewShardedWindow and NewShardedBucket. It is the
// same type as concurrency.ShardedOption, so either package's WithShardCount
// serves both.
type ShardedOption = shard.Option

// WithShardCount sets the number of shard-local caches, a power of two. The
// default is four times the power of two at or above GOMAXPROCS, so that
// callers picking a shard at random rarely meet on one.
func WithShardCount(n int) ShardedOption { return shard.WithCount(n) }

// shardCount validates opts and returns the number of shards they ask for
// and whether one of them set it.
func shardCount(opts []ShardedOption) (n int, set bool, err error) {
	return shard.Count("ratelimit", opts)
}

// pickShard returns the calling goroutine's shard below mask+1 (see
// shard.Pick: the round trip of one frame stays on one shard).
func pickShard(mask uint64) uint64 { return shard.Pick(mask) }
