package shard

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// TestOfStackSpreadsAdjacentStacks: any shards/4 goroutines on adjacent
// 2 KiB stacks (goroutines started together often get such stacks) land on
// distinct shards, for every shard count, wherever the run starts. The hash
// it replaced put the four 2 KiB stacks of an 8 KiB block on one shard.
func TestOfStackSpreadsAdjacentStacks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for shards := 4; shards <= 1<<16; shards *= 2 {
		run := shards / 4
		mask := uint64(shards - 1)
		seen := make(map[uint64]uintptr, run)
		for range 20 {
			base := uintptr(rng.Uint64N(1<<46)) &^ (2<<10 - 1)
			clear(seen)
			for i := range run {
				sp := base + uintptr(i)<<11 + 2<<10 - 200 // near the top of its stack
				s := ofStack(sp, mask)
				if other, ok := seen[s]; ok {
					t.Fatalf("%d shards: stacks at %#x and %#x, %d apart in a run of %d, both on shard %d",
						shards, other, sp, (sp-other)>>11, run, s)
				}
				seen[s] = sp
			}
		}
	}
}

// TestPickStaysBelowTheShardCount: Pick never returns an index past the
// mask, for every shard count.
func TestPickStaysBelowTheShardCount(t *testing.T) {
	for shards := 1; shards <= 1<<16; shards *= 2 {
		if got := Pick(uint64(shards - 1)); got >= uint64(shards) {
			t.Fatalf("%d shards: Pick = %d", shards, got)
		}
	}
}

// TestCountReportsWhatWasAsked: the default is four times the power of two
// at or above GOMAXPROCS and is not marked as set; WithCount(n) gives n and
// marks it, WithCount(0) marks the default; the last option wins.
func TestCountReportsWhatWasAsked(t *testing.T) {
	def := 4
	for def/4 < runtime.GOMAXPROCS(0) {
		def *= 2
	}
	for _, c := range []struct {
		opts []Option
		n    int
		set  bool
	}{
		{nil, def, false},
		{[]Option{WithCount(1)}, 1, true},
		{[]Option{WithCount(1 << 16)}, 1 << 16, true},
		{[]Option{WithCount(0)}, def, true},
		{[]Option{WithCount(8), WithCount(2)}, 2, true},
	} {
		n, set, err := Count("pkg", c.opts)
		if err != nil || n != c.n || set != c.set {
			t.Errorf("Count(%v) = %d, %v, %v; want %d, %v", c.opts, n, set, err, c.n, c.set)
		}
	}
}

// TestCountErrorsNameThePackage: a nil option and a count that is not a
// power of two in range are errors whose text starts with the caller's
// package name.
func TestCountErrorsNameThePackage(t *testing.T) {
	for _, opts := range [][]Option{{nil}, {WithCount(-1)}, {WithCount(3)}, {WithCount(12)}, {WithCount(1 << 17)}} {
		_, _, err := Count("ratelimit", opts)
		if err == nil || !strings.HasPrefix(err.Error(), "ratelimit: ") {
			t.Errorf("Count(%v): error %v, want one starting with \"ratelimit: \"", opts, err)
		}
	}
}
