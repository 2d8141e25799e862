package ratelimit

import "time"

// MaxReserveWait is the longest wait ReserveN accepts: 2^59 ns (about 18
// years), the span bound of every rate primitive, so that now plus a wait
// plus a bucket's span never overflows.
const MaxReserveWait = time.Duration(maxRateSpan)

// Reservation is the outcome of a decision that may admit into the future
// (GCRA.ReserveN): the Decision, and how long the caller must wait before
// the admitted work may start. It is a plain value; keep it to Cancel the
// reservation if the work never starts.
type Reservation struct {
	// Decision is the decision as seen at now. When it is Allowed, the
	// request holds the instant now+Wait: it was charged as if admitted
	// then. Otherwise nothing was charged and RetryAfter is the exact wait
	// after which the same request would be admitted at once (Never when
	// it never can).
	Decision Decision
	// Wait is how long after now the admitted work may start: zero when it
	// may start at once, and for a rejection.
	Wait time.Duration
	// End is the state the reservation left (a GCRA's arrival time, on the
	// clock of the now it was decided at): Cancel undoes the reservation
	// only while the state still reads End, so that it never undoes anyone
	// else's admission. A store that keeps the state elsewhere keeps End
	// with the decision to cancel it the same way.
	End int64
}

// Allowed reports whether the request was admitted, at once or after Wait.
func (r Reservation) Allowed() bool { return r.Decision.Allowed() }

// checkReserve panics on waits ReserveN cannot honour: a caller's bug, as a
// negative n is.
func checkReserve(minWait, maxWait time.Duration) {
	if minWait < 0 || minWait > maxWait || maxWait > MaxReserveWait {
		panic("ratelimit: ReserveN needs 0 <= minWait <= maxWait <= MaxReserveWait")
	}
}

// ReserveN admits n tokens at the earliest instant t in
// [now+minWait, now+maxWait] at which the bucket holds them, charging s as
// if they were taken at t, and returns the Reservation (Wait = t - now).
// GCRA knows that instant exactly, so the reservation is exact: every
// admission, immediate or reserved, keeps the guarantee of GCRA at the
// instant it holds, under any interleaving. Reserved requests are served in
// the order they reserved, each at its own slot: N reservations of one token
// at a rate of one per interval hold slots one interval apart.
//
// When no such instant exists nothing is charged; the Decision's RetryAfter
// is AllowN's (the wait until the same request would be admitted at once),
// Never for n above the burst. minWait lets several limits of one request
// agree on a start: a limit decided after another that reserved an instant
// asks for no earlier one. ReserveN never blocks and does not allocate; it
// panics when n is not positive or the waits are not
// 0 <= minWait <= maxWait <= MaxReserveWait.
//
// While reservations are pending (the bucket owes tokens beyond empty),
// AllowN rejects, and Refund gives nothing back (see Refund): whoever
// reserved keeps the slot it was promised.
func (g *GCRA) ReserveN(s *GCRAState, now, n int64, minWait, maxWait time.Duration) Reservation {
	checkReserve(minWait, maxWait)
	if n <= 0 || n > g.burst {
		if n <= 0 {
			panic("ratelimit: GCRA.ReserveN with n <= 0")
		}
		return Reservation{Decision: g.outOfRange(s, now, n)}
	}
	cost := n * g.interval
	from, until := now+int64(minWait), now+int64(maxWait)
	for {
		tat := s.tat.Load()
		next := max(tat, from) + cost
		// The request fits at t when next-tau <= t: the first such t at or
		// after from is its slot.
		at := max(from, next-g.tau)
		if at > until {
			return Reservation{Decision: g.limited(tat, now, max(tat, now)+cost-g.tau)}
		}
		// One CAS on the arrival time, as in AllowN: a reservation and an
		// immediate admission order themselves by it, so slots never
		// overlap however the callers interleave.
		if s.tat.CompareAndSwap(tat, next) {
			return Reservation{Decision: g.view(next, now), Wait: time.Duration(at - now), End: next}
		}
	}
}

// Cancel gives back the n tokens of reservation r, whose work will not run
// (its context ended while it waited, or a later limit of the same request
// rejected), at now. It undoes r exactly when nothing was admitted or
// reserved after it (the state still reads r.End). Otherwise an admission
// at once (Wait 0) is given back as Refund does, and a reserved one's slot
// stays unused: later reservations keep theirs, and moving them would make
// one start early, so the bucket admits less by that slot, never more.
// Cancel of a rejected reservation does nothing. It never blocks; a
// negative n panics.
func (g *GCRA) Cancel(s *GCRAState, now, n int64, r Reservation) {
	if n < 0 {
		panic("ratelimit: GCRA.Cancel with negative n")
	}
	if !r.Allowed() || n == 0 {
		return
	}
	// Compared against End, the CAS cannot undo anyone else's slot: an
	// admission after this reservation moved the arrival time past End, and
	// while it is pending Refund cannot move it back.
	if r.End == 0 || !s.tat.CompareAndSwap(r.End, max(r.End-min(n, g.burst)*g.interval, now)) {
		if r.Wait == 0 {
			g.Refund(s, now, n)
		}
	}
}

// ReserveN admits n tokens at the earliest instant within the waits at which
// the bucket holds them; see GCRA.ReserveN.
func (b *TokenBucket) ReserveN(now, n int64, minWait, maxWait time.Duration) Reservation {
	return b.gcra.ReserveN(&b.state, now, n, minWait, maxWait)
}

// Cancel gives back a reservation whose work will not run; see GCRA.Cancel.
func (b *TokenBucket) Cancel(now, n int64, r Reservation) { b.gcra.Cancel(&b.state, now, n, r) }

// ReserveN admits n at the earliest instant t in [now+minWait,
// now+maxWait] at which the window holding t has room for them: at once in
// the window of now+minWait, or at the start of a later window. The state
// holds one window, so a reservation reaches at most the window after the
// one it counts (the one after a full window); every window still counts
// at most limit, exactly. The Reservation's End is the window it counts
// in. Like GCRA.ReserveN it never blocks, does not allocate and panics on
// n <= 0 or waits outside 0 <= minWait <= maxWait <= MaxReserveWait; n
// above the limit is rejected with RetryAfter Never. A reservation that
// lands in a later window than now's makes AllowN at now reject until
// then: the windows before it are full, or were skipped for it (minWait
// past a boundary), which only admits less.
func (f *FixedWindow) ReserveN(s *FixedWindowState, now, n int64, minWait, maxWait time.Duration) Reservation {
	checkReserve(minWait, maxWait)
	if n <= 0 {
		panic("ratelimit: FixedWindow.ReserveN with n <= 0")
	}
	from, until := now+int64(minWait), now+int64(maxWait)
	for {
		old := s.w.Load()
		idx, cnt := int64(old>>f.shift), int64(old&f.mask)
		at := from
		switch first := f.index.div(from); {
		case n > f.limit:
			return Reservation{Decision: f.AllowN(s, now, n)} // Never, charging nothing
		case idx < first:
			idx, cnt = first, 0 // a fresh window
		case idx > first:
			at = idx * f.window // a later window counts already: its start
		}
		if cnt+n > f.limit {
			idx, cnt, at = idx+1, 0, (idx+1)*f.window
		}
		if at > until {
			// The request does not fit before until, nor (from <= until) at
			// now: AllowN rejects it, charging nothing, with its wait.
			return Reservation{Decision: f.AllowN(s, now, n)}
		}
		if s.w.CompareAndSwap(old, uint64(idx)<<f.shift|uint64(cnt+n)) {
			d := f.decision(idx, cnt+n, idx > f.index.div(now), now)
			return Reservation{Decision: d, Wait: time.Duration(at - now), End: idx}
		}
	}
}

// Cancel gives back the n admissions of reservation r, whose work will not
// run, at now. An admission at once (Wait 0) is given back as Refund does.
// A reserved one is undone exactly while the state still counts its window
// (r.End): the window's count is its admissions, so any one of them may
// leave and another take its place. When that leaves a window that has not
// begun empty, the state goes back to the window before, counted full:
// reservations moved on from it because it was (for them) full, so later
// ones land there again rather than a window later, and nothing more is
// admitted in it. Cancel of a rejected reservation does nothing; a negative
// n panics.
func (f *FixedWindow) Cancel(s *FixedWindowState, now, n int64, r Reservation) {
	if n < 0 {
		panic("ratelimit: FixedWindow.Cancel with negative n")
	}
	if !r.Allowed() || n == 0 {
		return
	}
	if r.Wait == 0 {
		f.Refund(s, now, n)
		return
	}
	for {
		old := s.w.Load()
		idx, cnt := int64(old>>f.shift), int64(old&f.mask)
		if idx != r.End || cnt == 0 {
			return
		}
		w := uint64(idx)<<f.shift | uint64(cnt-min(n, cnt))
		if cnt <= n && f.index.div(now) < idx {
			w = uint64(idx-1)<<f.shift | uint64(f.limit) // idx > div(now) >= 0
		}
		if s.w.CompareAndSwap(old, w) {
			return
		}
	}
}
