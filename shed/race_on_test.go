//go:build race

package shed

// raceEnabled: the race detector makes every decision some fifty times
// slower, so the key floods are smaller under it.
const raceEnabled = true
