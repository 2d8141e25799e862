package concurrency

import (
	"bufio"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/ratelimit"
)

// smaps returns the fields of the mapping of this process that holds
// addr, from /proc/self/smaps: "VmFlags", "AnonHugePages" and the others,
// each with its text after the colon.
func smaps(t *testing.T, addr uintptr) map[string]string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	var fields map[string]string // of the mapping that holds addr, once found
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if lo, hi, ok := strings.Cut(strings.Fields(line)[0], "-"); ok {
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil { // the header line of a mapping
				if fields != nil {
					break
				}
				if uint64(addr) >= l && uint64(addr) < h {
					fields = map[string]string{}
				}
				continue
			}
		}
		if k, v, ok := strings.Cut(line, ":"); ok && fields != nil {
			fields[k] = strings.TrimSpace(v)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if fields == nil {
		t.Fatalf("no mapping of this process holds %#x", addr)
	}
	return fields
}

// skipWithoutTHP skips a test where transparent huge pages are
// unavailable.
func skipWithoutTHP(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages unavailable (%q, %v)", mode, err)
	}
}

// wholeHugePage returns the bytes of a whole huge page inside s, and
// their address.
func wholeHugePage[T any](t *testing.T, s []T) ([]byte, uintptr) {
	t.Helper()
	p := unsafe.Pointer(unsafe.SliceData(s))
	start, size := uintptr(p), uintptr(len(s))*unsafe.Sizeof(s[0])
	mid := (start + size/2) &^ (hugePage - 1)
	if mid < start || mid+hugePage > start+size {
		t.Fatalf("%d bytes at %#x hold no whole huge page", size, start)
	}
	return unsafe.Slice((*byte)(unsafe.Add(p, mid-start)), hugePage), mid
}

// TestTableBucketsAreAdvisedForHugePages: on Linux with transparent huge
// pages available, the whole huge pages inside a large table's buckets are
// advised for them (the mapping's VmFlags show hg), so that a lookup of a
// random key does not miss the TLB as it would over 4 KiB pages; a table
// smaller than a huge page is left alone.
func TestTableBucketsAreAdvisedForHugePages(t *testing.T) {
	skipWithoutTHP(t)
	recovered := func(*ratelimit.GCRAState, int64) bool { return true }
	tab, err := NewTable[ratelimit.GCRAState](1<<20, recovered)
	if err != nil {
		t.Fatal(err)
	}
	_, page := wholeHugePage(t, tab.buckets)
	if flags := strings.Fields(smaps(t, page)["VmFlags"]); !slices.Contains(flags, "hg") {
		t.Errorf("%d buckets: mapping flags %v lack hg", len(tab.buckets), flags)
	}
	small, err := NewTable[ratelimit.GCRAState](1000, recovered)
	if err != nil {
		t.Fatal(err)
	}
	if adviseHugePages(small.buckets) {
		t.Errorf("a table of %d buckets was advised", len(small.buckets))
	}
}

// TestReusedBucketsComeHugeAtOnce: buckets in memory that is resident
// already in small pages (the heap reused it, and the runtime zeroed it)
// are collapsed into huge pages when advised, rather than when the
// kernel's khugepaged gets to them; where the kernel cannot collapse them
// (no MADV_COLLAPSE, no free huge page), the test says so and skips.
func TestReusedBucketsComeHugeAtOnce(t *testing.T) {
	skipWithoutTHP(t)
	s := make([]bucket[ratelimit.GCRAState], (8<<20)/unsafe.Sizeof(bucket[ratelimit.GCRAState]{}))
	for i := range s {
		s[i].keys[0].Store(1) // every page touched: resident, in small pages
	}
	r, page := wholeHugePage(t, s)
	if h := smaps(t, page)["AnonHugePages"]; h != "0 kB" {
		t.Skipf("the memory came huge before any advice (%s): THP is always on", h)
	}
	if !adviseHugePages(s) {
		t.Fatalf("%d buckets were not advised", len(s))
	}
	if h := smaps(t, page)["AnonHugePages"]; h == "0 kB" {
		if err := syscall.Madvise(r, madvCollapse); err != nil {
			t.Skipf("the kernel collapses no huge page here: %v", err)
		}
		t.Errorf("advised buckets, resident before, hold no huge page (a collapse asked afterwards succeeded)")
	}
	runtime.KeepAlive(s)
}
