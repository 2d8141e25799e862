package grpcshed

import "sync/atomic"

// retryBudget allows retries in proportion to calls: a call deposits ratio
// of a retry, up to burst retries, and a retry withdraws one. Its balance
// is in millionths of a retry.
type retryBudget struct {
	balance      atomic.Int64
	ratio, limit int64
}

const budgetUnit = 1_000_000

// init sets the budget's ratio and burst, and fills it.
func (b *retryBudget) init(ratio float64, burst int) {
	b.ratio, b.limit = int64(ratio*budgetUnit), int64(burst)*budgetUnit
	b.balance.Store(b.limit)
}

func (b *retryBudget) deposit() {
	for { // CAS: the balance never passes its limit
		old := b.balance.Load()
		n := min(old+b.ratio, b.limit)
		if n == old || b.balance.CompareAndSwap(old, n) {
			return
		}
	}
}

func (b *retryBudget) withdraw() bool {
	for { // CAS: the balance never goes below zero
		old := b.balance.Load()
		if old < budgetUnit {
			return false
		}
		if b.balance.CompareAndSwap(old, old-budgetUnit) {
			return true
		}
	}
}
