package redisstore

import (
	"context"
	"strconv"

	"github.com/sluicehq/sluice/store/regions"
)

// exchangeBatch is the most keys one script call carries.
const exchangeBatch = 256

// Exchange returns a regions.Exchange on the Store's Redis: the global store
// of regions.Store, on a Redis every region reaches. Each limit's key is one
// hash under the prefix, {prefix}:x:<len(name)>:<name>:<key>, holding its
// latest window and each region's count in it, with the TTL Publish names;
// Publish and Others are one script call per 256 keys, within the Store's
// deadline (WithTimeout: give it the cross-region latency), never retried
// (a Publish that ran twice keeps the same largest count; an Others is a
// read). Errors: the caller's ctx.Err() when ctx ends first, and an error
// matching store.ErrUnavailable when Redis fails. The Store's limits play
// no part: a Store may serve as a region's store and an Exchange both, or
// either.
func (s *Store) Exchange() regions.Exchange { return exchange{s} }

// exchange is a Store seen as a regions.Exchange.
type exchange struct{ s *Store }

var _ regions.Exchange = exchange{}

func (x exchange) key(u *regions.Usage) string {
	return x.s.tag + ":x:" + strconv.Itoa(len(u.Limit)) + ":" + u.Limit + ":" + u.Key
}

// Publish records region's counts (regions.Exchange).
func (x exchange) Publish(ctx context.Context, region string, usage []regions.Usage) error {
	for from := 0; from < len(usage); from += exchangeBatch {
		batch := usage[from:min(from+exchangeBatch, len(usage))]
		keys := make([]string, len(batch))
		args := make([]any, 2, 2+3*len(batch))
		args[0], args[1] = "p", region
		for i := range batch {
			u := &batch[i]
			keys[i] = x.key(u)
			args = append(args, u.Window, u.Used, max(1, u.TTL.Milliseconds()+1))
		}
		if _, err := x.s.run(ctx, &x.s.exchange, keys, args); err != nil {
			return err
		}
	}
	return nil
}

// Others sets each entry's Used to the other regions' sum
// (regions.Exchange).
func (x exchange) Others(ctx context.Context, region string, usage []regions.Usage) error {
	for from := 0; from < len(usage); from += exchangeBatch {
		batch := usage[from:min(from+exchangeBatch, len(usage))]
		keys := make([]string, len(batch))
		args := make([]any, 2, 2+len(batch))
		args[0], args[1] = "o", region
		for i := range batch {
			keys[i] = x.key(&batch[i])
			args = append(args, batch[i].Window)
		}
		vals, err := x.s.run(ctx, &x.s.exchange, keys, args)
		if err != nil {
			return err
		}
		for i := range batch {
			n, err := replyInt(vals, i)
			if err != nil {
				return err
			}
			batch[i].Used = n
		}
	}
	return nil
}
