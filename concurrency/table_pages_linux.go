package concurrency

import (
	"syscall"
	"unsafe"
)

// hugePage is the size of a transparent huge page with 4 KiB base pages
// (x86-64, and arm64 as most distributions build it). Where the kernel's
// huge page is larger, an advised range simply holds fewer whole ones.
const hugePage = 2 << 20

// adviseHugePages asks the kernel to back the whole huge pages inside s
// with transparent huge pages (madvise MADV_HUGEPAGE) and reports whether
// it did. s is a fresh allocation that nothing reads yet: the advice
// only changes how its memory is paged, never its contents, and it takes
// effect at each page's first touch (memory touched before waits for the
// kernel's khugepaged). With THP in "madvise" mode (a common default) the
// Go heap is otherwise backed by 4 KiB pages, and a lookup of a random key
// in tens of MiB of buckets then misses the TLB nearly every time. The
// runtime keeps owning the memory: it frees it with the table, advice
// and all, which it may reuse for other objects (harmless). A range
// without a whole huge page is left alone (false), and so is every error
// (a kernel without THP answers EINVAL): the table works the same, only
// slower.
func adviseHugePages[T any](s []T) bool {
	size := uintptr(len(s)) * unsafe.Sizeof(*new(T))
	p := unsafe.Pointer(unsafe.SliceData(s))
	lo := (uintptr(p) + hugePage - 1) &^ (hugePage - 1)
	hi := (uintptr(p) + size) &^ (hugePage - 1)
	if size == 0 || hi <= lo {
		return false
	}
	return syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, lo-uintptr(p))), hi-lo), syscall.MADV_HUGEPAGE) == nil
}
