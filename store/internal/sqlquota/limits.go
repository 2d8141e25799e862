package sqlquota

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/store"
)

// Limits is the table of a SQL store's registered limits (a
// store.Registry of Limit) with what the store's columns keep: Register,
// Update and Unregister do no I/O and serve the store's methods of those
// names. Set the fields in the composite literal that makes the store,
// then leave them: its methods are safe for concurrent use as the
// Registry's are. It must not be copied after first use.
type Limits struct {
	// Backend names the store in errors ("the MySQL store keeps ..."),
	// and Package names its package ("mysqlstore: cleanup limit ...").
	Backend, Package string
	// Sliding says whether the store keeps sliding windows.
	Sliding bool
	// Text refuses a name that is not valid UTF-8 or holds a NUL byte.
	Text bool
	// MaxName and MaxKey bound a limit's name and a hit's key in bytes;
	// zero is no bound.
	MaxName, MaxKey int

	reg store.Registry[Limit]
}

// Register validates spec (store.Spec.Validate, then what the store
// keeps: its algorithm, and its name under Text and MaxName) and adds it.
// Errors start with "store: ".
func (ls *Limits) Register(spec store.Spec) (store.LimitID, error) {
	l, err := ls.newLimit(spec)
	if err != nil {
		return 0, err
	}
	return ls.reg.Add(spec.Name, l)
}

// Update validates spec as Register does and puts it in the place of limit
// id when store.CheckInPlace approves; the limit is unchanged on an error,
// which matches store.ErrUnknownLimit for an id not registered.
func (ls *Limits) Update(id store.LimitID, spec store.Spec) error {
	l, err := ls.newLimit(spec)
	if err != nil {
		return err
	}
	return ls.reg.Replace(id, l, func(old *Limit) error { return store.CheckInPlace(old.Spec, spec, ls.Backend) })
}

// Unregister drops limit id, whose name is free again. It returns an
// error matching store.ErrUnknownLimit when id is not registered.
func (ls *Limits) Unregister(id store.LimitID) error {
	return ls.reg.Remove(id, (*Limit).Name)
}

// newLimit validates spec for the store's decide routine.
func (ls *Limits) newLimit(spec store.Spec) (*Limit, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if ls.MaxName > 0 && len(spec.Name) > ls.MaxName {
		return nil, fmt.Errorf("store: limit %q: the %s store keeps names of at most %d bytes, got %d", spec.Name, ls.Backend, ls.MaxName, len(spec.Name))
	}
	if ls.Text && (!utf8.ValidString(spec.Name) || strings.IndexByte(spec.Name, 0) >= 0) {
		return nil, fmt.Errorf("store: limit %q: the %s store needs a name of valid UTF-8 without NUL bytes", spec.Name, ls.Backend)
	}
	return NewLimit(spec, ls.Backend, ls.Sliding)
}

// Lookup returns limit id, or nil when it is not registered.
func (ls *Limits) Lookup(id store.LimitID) *Limit { return ls.reg.Lookup(id) }

// Known returns limit id, or an error matching store.ErrUnknownLimit when
// it is not registered.
func (ls *Limits) Known(id store.LimitID) (*Limit, error) {
	l := ls.reg.Lookup(id)
	if l == nil {
		return nil, fmt.Errorf("%w: limit %d is not registered", store.ErrUnknownLimit, id)
	}
	return l, nil
}

// Hits fills lim with the limits req's hits name. It returns an error
// matching store.ErrUnknownLimit for a hit of a limit not registered, and
// one starting with "store: " for a key over MaxKey. It does not allocate
// unless it fails.
func (ls *Limits) Hits(req *store.Request, lim *[store.MaxHits]*Limit) error {
	all := ls.reg.All()
	for i := range req.Hits[:req.N] {
		h := &req.Hits[i]
		if int(h.Limit) > len(all) || all[h.Limit-1] == nil {
			return fmt.Errorf("%w: hit %d names limit %d", store.ErrUnknownLimit, i, h.Limit)
		}
		if ls.MaxKey > 0 && len(h.Key) > ls.MaxKey {
			return fmt.Errorf("store: hit %d: the %s store keeps keys of at most %d bytes, got %d", i, ls.Backend, ls.MaxKey, len(h.Key))
		}
		lim[i] = all[h.Limit-1]
	}
	return nil
}

// Decision checks the arguments of a Decide call as a SQL store's Decide
// does before any I/O: a request and a result (an error starting with
// "store: " otherwise), store.Request.Check, no max wait
// (store.RefuseReserve under Package: the SQL decides at once), then the
// hits' limits, filling lim (see Hits).
func (ls *Limits) Decision(req *store.Request, res *store.Result, lim *[store.MaxHits]*Limit) error {
	if req == nil || res == nil {
		return errors.New("store: Decide needs a request and a result")
	}
	if err := req.Check(); err != nil {
		return err
	}
	if err := store.RefuseReserve(req, ls.Package); err != nil {
		return err
	}
	return ls.Hits(req, lim)
}

// CheckCleanup returns an error starting with Package for a Cleanup limit
// outside 1..2^31-1 (the SQL takes an int32 count).
func (ls *Limits) CheckCleanup(limit int) error {
	if limit <= 0 || limit > 1<<31-1 {
		return fmt.Errorf("%s: cleanup limit must be from 1 to 2^31-1, got %d", ls.Package, limit)
	}
	return nil
}

// ReleaseNone is store.Registry.ReleaseNone: a SQL store holds no lease.
func (ls *Limits) ReleaseNone(lease store.Lease) error { return ls.reg.ReleaseNone(lease) }
