//go:build !race

package shed

// raceEnabled: see race_on_test.go.
const raceEnabled = false
