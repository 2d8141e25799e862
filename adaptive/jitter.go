package adaptive

// jitter is a tiny deterministic generator (splitmix64) for probe
// schedules, so that algorithms stay pure functions of their inputs and seed.
type jitter struct{ state uint64 }

// float returns a number in [0, 1).
func (j *jitter) float() float64 {
	j.state += 0x9e3779b97f4a7c15
	z := j.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}
