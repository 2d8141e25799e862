package sqlquota

import "github.com/sluicehq/sluice/store"

// PaidOff returns the instant, in Unix ns on the database's clock, at which
// the admission res left hit i's token bucket full again: res.Now plus the
// hit's ResetAfter (both in ns, so exact). A refund routine gives back of
// that admission only the debt still owed before it, never the tokens the
// bucket has refilled since. For a window's hit it is a number the
// routines ignore. It does not check i against res.N.
func PaidOff(res *store.Result, i int) int64 {
	return res.Now + int64(res.Hits[i].Decision.ResetAfter)
}
