// Package allocsize says how much memory the Go allocator takes for an
// allocation, so that concurrency's table sizes (concurrency.AllocBytes,
// TableBytes) and ratelimit's per-key sizes (SlidingLog.KeyBytes) state
// bounds that are bounds, from one rule.
package allocsize

// Of returns the memory an allocation of n bytes takes: n rounded up to the
// Go allocator's size class, as append rounds a slice's capacity (measured
// so, on a small allocation), or to whole 8 KiB pages above 32 KiB, the
// largest size class. It is 0 for n <= 0 and is safe for concurrent use.
func Of(n int64) int64 {
	const largest, page = 32 << 10, 8 << 10
	switch {
	case n <= 0:
		return 0
	case n > largest:
		return (n + page - 1) &^ (page - 1)
	}
	return int64(cap(append([]byte(nil), make([]byte, n)...)))
}
