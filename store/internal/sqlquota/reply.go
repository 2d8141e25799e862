package sqlquota

import (
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// Decode fills res from vals, the decide routine's reply to req, whose
// hits name the limits lim: the database's now (Unix ns), how many hits it
// evaluated, then five numbers per evaluated hit (admitted 0/1, why
// rejected: 2 when the cost exceeds the limit, remaining, retry after in
// ns, reset after in ns). It reports whether vals is such a reply, with a
// rejection only as the last hit evaluated and every hit evaluated when
// all are admitted; res is unspecified when it is not. It does not
// allocate.
func Decode(vals []int64, req *store.Request, res *store.Result, lim *[store.MaxHits]*Limit) bool {
	if len(vals) < 2 {
		return false
	}
	n := vals[1]
	if n < 1 || n > int64(req.N) || len(vals) != 2+5*int(n) {
		return false
	}
	res.Now, res.N, res.Decider, res.Allowed = vals[0], int(n), 0, true
	for i := range res.N {
		f := vals[2+5*i : 2+5*i+5]
		d := ratelimit.Decision{
			Limit:      lim[i].Spec.Limit,
			Remaining:  f[2],
			ResetAfter: time.Duration(f[4]),
		}
		switch {
		case f[0] == 1:
			// Admitted: RetryAfter stays 0.
		case f[1] == 2:
			d.RetryAfter = ratelimit.Never
		default:
			// At least 1 ns: a rejection must not read as an admission.
			d.RetryAfter = max(1, time.Duration(f[3]))
		}
		res.Hits[i] = store.HitResult{Decision: d}
		if !d.Allowed() {
			if i != res.N-1 {
				return false
			}
			res.Allowed, res.Decider = false, i
		} else if d.Remaining < res.Hits[res.Decider].Decision.Remaining {
			res.Decider = i
		}
	}
	return !res.Allowed || res.N == req.N
}
