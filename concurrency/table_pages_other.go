//go:build !linux

package concurrency

// adviseHugePages leaves s alone and reports false: transparent huge pages
// are advised on Linux only.
func adviseHugePages[T any](s []T) bool { return false }
