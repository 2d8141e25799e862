package sqlquota

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Usage reads key's use of limit id, which s keeps in limits, as s.Decide
// reports it for a cost of 0 (the SQL stores charge, write and lock nothing
// then): one call of Decide, whose errors it returns. It returns an error
// matching store.ErrUnknownLimit for an id not in limits. A fixed window's
// Start and End are those of the window holding the reading's instant on
// the limit's calendar.
func Usage(ctx context.Context, s store.Store, limits *Limits, id store.LimitID, key string) (store.Usage, error) {
	l, err := limits.Known(id)
	if err != nil {
		return store.Usage{}, err
	}
	var req store.Request
	req.Add(id, key, 0)
	var res store.Result
	if err := s.Decide(ctx, &req, &res); err != nil {
		return store.Usage{}, err
	}
	d := res.Hits[0].Decision
	u := store.Usage{
		Limit:      d.Limit,
		Used:       d.Limit - d.Remaining,
		Remaining:  d.Remaining,
		ResetAfter: d.ResetAfter,
		Now:        time.Unix(0, res.Now).UTC(),
	}
	if l.Spec.Algorithm == store.FixedWindow && res.Now >= 0 {
		at, span := l.Clock.At(res.Now), l.Param
		idx := at / span
		u.Start = time.Unix(0, l.Clock.Real(idx*span)).UTC()
		u.End = time.Unix(0, l.Clock.Real((idx+1)*span)).UTC()
	}
	return u, nil
}
