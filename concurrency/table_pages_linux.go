package concurrency

import (
	"syscall"
	"unsafe"
)

// hugePage is the size of a transparent huge page with 4 KiB base pages
// (x86-64, and arm64 as most distributions build it). Where the kernel's
// huge page is larger, an advised range simply holds fewer whole ones.
const hugePage = 2 << 20

// madvCollapse is MADV_COLLAPSE (Linux 6.1), which syscall does not name.
const madvCollapse = 25

// adviseHugePages asks the kernel to back the whole huge pages inside s
// with transparent huge pages (madvise MADV_HUGEPAGE) and reports whether
// it did. s is a fresh allocation that nothing reads yet: the advice only
// changes how its memory is paged, never its contents. With THP in
// "madvise" mode (a common default) the Go heap is otherwise backed by
// 4 KiB pages, and a lookup of a random key in tens of MiB of buckets then
// misses the TLB nearly every time. Memory the heap hands out for the
// first time is not resident yet: each of its pages comes huge at its
// first touch. Memory it reuses, the runtime zeroed, so it is resident in
// small pages: adviseHugePages then collapses it into huge pages at once
// (MADV_COLLAPSE, a copy of s, which makes nothing more resident); on a
// kernel without it, khugepaged does so in time. The runtime keeps owning
// the memory: it frees it with the table, advice and all, and may reuse it
// for other objects (harmless). A range without a whole huge page is left
// alone (false), and so is every error (a kernel without THP answers
// EINVAL): the table works the same, only slower.
func adviseHugePages[T any](s []T) bool {
	size := uintptr(len(s)) * unsafe.Sizeof(*new(T))
	p := unsafe.Pointer(unsafe.SliceData(s))
	lo := (uintptr(p) + hugePage - 1) &^ (hugePage - 1)
	hi := (uintptr(p) + size) &^ (hugePage - 1)
	if size == 0 || hi <= lo {
		return false
	}
	r := unsafe.Slice((*byte)(unsafe.Add(p, lo-uintptr(p))), hi-lo)
	if syscall.Madvise(r, syscall.MADV_HUGEPAGE) != nil {
		return false
	}
	// The runtime zeroes all of a reused allocation or none of it, so its
	// first page tells.
	if resident(r) {
		_ = syscall.Madvise(r, madvCollapse) // failing, khugepaged will
	}
	return true
}

// resident reports whether the page at the start of b is resident
// (mincore).
func resident(b []byte) bool {
	var vec [1]byte
	_, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), 1, uintptr(unsafe.Pointer(&vec[0])))
	return errno == 0 && vec[0]&1 != 0
}
