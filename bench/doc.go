// Package bench measures sluice side by side with the libraries engineers use
// today. It is a nested module so that peer libraries never enter sluice's
// own dependency graph; every benchmark is named <Case>/<impl> so that one
// go test -bench run compares implementations on the same machine.
package bench
