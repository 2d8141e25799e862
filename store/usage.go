package store

import "time"

// Usage is one key's use of one limit at one instant, read without
// charging: for billing and for a status page. The SQL stores (pgstore,
// mysqlstore) return it from their Usage method; it is a plain value, safe
// to copy and share. The zero value is a reading of nothing.
type Usage struct {
	// Limit is the limit's Limit.
	Limit int64
	// Used is what the key has taken: the units counted in the current
	// window of a fixed window (at most Limit), in the sliding window
	// (weighted, as it decides), the tokens a token bucket owes, rounded
	// up. Remaining is Limit − Used.
	Used, Remaining int64
	// Start and End bound the current window of a fixed window on the
	// store's clock (End exclusive; a calendar month's are its first
	// instant and the next month's); both are zero for a token bucket and
	// a sliding window, which have no period of their own.
	Start, End time.Time
	// ResetAfter is how long until the key has its whole limit again (the
	// window ends, the bucket is full); zero when it has it now.
	ResetAfter time.Duration
	// Now is the instant of the reading on the store's clock.
	Now time.Time
}
