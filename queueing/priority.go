package queueing

import "strconv"

// Priority is the importance of a request; higher is more important. Any
// integer is a valid level. The four named levels are Google SRE's
// criticality classes; requests made through Queue.Acquire have Critical,
// the SRE default.
type Priority int

// The SRE criticality classes, lowest first.
const (
	Sheddable     Priority = 0
	SheddablePlus Priority = 1
	Critical      Priority = 2
	CriticalPlus  Priority = 3
)

// String returns the SRE class name of p, or "priority(N)" for other levels.
func (p Priority) String() string {
	switch p {
	case Sheddable:
		return "sheddable"
	case SheddablePlus:
		return "sheddable-plus"
	case Critical:
		return "critical"
	case CriticalPlus:
		return "critical-plus"
	}
	return "priority(" + strconv.Itoa(int(p)) + ")"
}

// Share returns how many waiters a queue of maxLen may already hold for a
// request of priority p to still join it: the graded cut-off that sheds the
// lowest classes first as the queue fills, instead of one cliff for all.
// Critical and above may fill the whole queue; below it the share falls by
// a third per level: Sheddable may join only the first third, SheddablePlus
// the first two thirds, and levels below Sheddable never wait. That is
// Share = maxLen * (p+1) / 3, bounded to [0, maxLen].
//
// A request turned away by the cut-off may still displace the waiter that
// would be served last, when that one has lower priority (see Queue).
// Share is a pure function.
func Share(p Priority, maxLen int) int {
	switch {
	case p >= Critical:
		return maxLen
	case p < Sheddable:
		return 0
	}
	return int(int64(maxLen) * int64(p+1) / int64(Critical+1))
}
