package shed

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/store"
)

// ResetKey forgets client v's usage of per-key rule name: an operator
// giving a tenant its daily quota back, or unblocking one account. v is the
// client as the rule's identity sees it: an IP address (grouped as the
// middleware groups it), a user id, an API key (raw; hashed here) or a
// tenant id. The key's state under an override of the rule is forgotten
// too. It returns an error, never naming v, for an unknown or Global rule,
// a value the identity cannot have, a store that cannot reset a key
// (store.Resetter: Memory and redisstore can), and the store's error. Safe
// for concurrent use with decisions; one racing with it is counted before
// or after the reset, or not at all.
func (c *Controller) ResetKey(ctx context.Context, name, v string) error {
	rs, ok := c.storage.store.(store.Resetter)
	if !ok {
		return fmt.Errorf("shed: ResetKey: the store (%T) cannot reset a key", c.storage.store)
	}
	s := c.set.Load()
	for i := range s.rules {
		r := &s.rules[i]
		if r.Name != name {
			continue
		}
		if r.local() {
			return fmt.Errorf("shed: ResetKey: rule %q is Global: it has no keys", name)
		}
		key, err := c.overrideKey(&r.Rule, v)
		if err != nil {
			return fmt.Errorf("shed: ResetKey: rule %q: %w", name, err)
		}
		err = rs.Reset(ctx, r.id, key)
		if s.over != nil {
			if o, ok := s.over[i][key]; ok {
				err = errors.Join(err, rs.Reset(ctx, o.id, key))
			}
		}
		if err != nil {
			return fmt.Errorf("shed: ResetKey: rule %q: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("shed: ResetKey: no rule %q", name)
}
