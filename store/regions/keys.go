package regions

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// keyShards is the number of shards of a keyTable: decisions on different
// keys rarely meet on one lock.
const keyShards = 64

// keyTable is what a Store knows of each key of one global limit in its
// current window: this region's count (the largest its store reported) and
// the other regions' (as of the last sync). It holds at most the Store's
// capacity, counted over all its limits by one counter; the sync drops the
// keys whose window has passed.
type keyTable struct {
	seed   maphash.Seed
	count  *atomic.Int64 // keys over every table of the Store
	cap    int64
	shards [keyShards]keyShard
}

type keyShard struct {
	mu sync.Mutex
	m  map[string]*keyState
	_  [40]byte // apart from the next shard's lock
}

// keyState is one key's counts in window.
type keyState struct {
	window       int64
	used, others int64
}

func newKeyTable(count *atomic.Int64, capacity int) *keyTable {
	t := &keyTable{seed: maphash.MakeSeed(), count: count, cap: int64(capacity)}
	for i := range t.shards {
		t.shards[i].m = make(map[string]*keyState)
	}
	return t
}

func (t *keyTable) shard(key string) *keyShard {
	return &t.shards[maphash.String(t.seed, key)%keyShards]
}

// admit makes sure key is tracked, and reports false when it is new and
// the Store tracks as many keys as it may.
func (t *keyTable) admit(key string) bool {
	sh := t.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[key]; ok {
		return true
	}
	if sh.m == nil {
		return false // cleared: the limit is gone
	}
	if t.count.Add(1) > t.cap {
		t.count.Add(-1)
		return false
	}
	sh.m[key] = &keyState{window: -1}
	return true
}

// observe records that key counted used in window, and returns what the
// other regions used in it, as far as this region knows.
func (t *keyTable) observe(key string, window, used int64) (others int64) {
	sh := t.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.m[key]
	if s == nil {
		return 0 // dropped by a sync as this decision ran: known nothing
	}
	if window > s.window {
		*s = keyState{window: window}
	}
	if window == s.window {
		s.used = max(s.used, used)
		return s.others
	}
	return 0
}

// snapshot appends the keys counted in window to out, with this region's
// counts, and drops the keys of windows before it.
func (t *keyTable) snapshot(limit string, window int64, out []Usage) []Usage {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for k, s := range sh.m {
			switch {
			case s.window == window:
				out = append(out, Usage{Limit: limit, Key: k, Window: window, Used: s.used})
			case s.window < window && s.window >= 0:
				delete(sh.m, k)
				t.count.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// learn sets key's other regions' count in window.
func (t *keyTable) learn(key string, window, others int64) {
	sh := t.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s := sh.m[key]; s != nil && s.window == window {
		s.others = others
	}
}

// reset forgets key's count in this region (its window starts over).
func (t *keyTable) reset(key string) {
	sh := t.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s := sh.m[key]; s != nil {
		s.used = 0
	}
}

// peekOthers returns what the other regions used of key in window, as far
// as this region knows, without tracking the key.
func (t *keyTable) peekOthers(key string, window int64) int64 {
	sh := t.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s := sh.m[key]; s != nil && s.window == window {
		return s.others
	}
	return 0
}

// clear drops every key, for a limit unregistered: later admits fail (the
// table is full), so that no count leaks into the Store's.
func (t *keyTable) clear() {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		t.count.Add(-int64(len(sh.m)))
		sh.m = nil
		sh.mu.Unlock()
	}
}
