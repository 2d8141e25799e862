package main

import (
	"math"
	"slices"
)

// quantile returns the nearest-rank p-quantile of xs (0 < p <= 1), sorting
// xs in place; zero for an empty xs.
func quantile(xs []int64, p float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	return xs[min(len(xs)-1, max(0, i))]
}

// spread is the median and the range of one figure over rounds.
type spread struct {
	med, lo, hi float64
	n           int
}

// spreadOf returns the median (the mean of the middle two for an even
// count), minimum and maximum of xs, ignoring NaNs; n is how many counted.
func spreadOf(xs []float64) spread {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return spread{med: math.NaN(), lo: math.NaN(), hi: math.NaN()}
	}
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{med: m, lo: s[0], hi: s[len(s)-1], n: len(s)}
}
