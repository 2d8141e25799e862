package concurrency

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/ratelimit"
)

// vmFlags returns the VmFlags of the mapping of this process that holds
// addr, from /proc/self/smaps.
func vmFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	inside := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if lo, hi, ok := strings.Cut(strings.Fields(line)[0], "-"); ok && !strings.HasSuffix(lo, ":") {
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				inside = uint64(addr) >= l && uint64(addr) < h
				continue
			}
		}
		if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok && inside {
			return strings.Fields(flags)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("no mapping of this process holds %#x", addr)
	return nil
}

// TestTableBucketsAreAdvisedForHugePages: on Linux with transparent huge
// pages available, the whole huge pages inside a large table's buckets are
// advised for them (the mapping's VmFlags show hg), so that a lookup of a
// random key does not miss the TLB as it would over 4 KiB pages; a table
// smaller than a huge page is left alone.
func TestTableBucketsAreAdvisedForHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages unavailable (%q, %v)", mode, err)
	}
	recovered := func(*ratelimit.GCRAState, int64) bool { return true }
	tab, err := NewTable[ratelimit.GCRAState](1<<20, recovered)
	if err != nil {
		t.Fatal(err)
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(tab.buckets)))
	size := uintptr(len(tab.buckets)) * unsafe.Sizeof(tab.buckets[0])
	mid := (start + size/2) &^ (hugePage - 1) // a whole huge page inside
	if mid < start || mid+hugePage > start+size {
		t.Fatalf("a table of %d bytes holds no whole huge page", size)
	}
	if flags := vmFlags(t, mid); !slices.Contains(flags, "hg") {
		t.Errorf("buckets at %#x (%d bytes): mapping flags %v lack hg", start, size, flags)
	}
	small, err := NewTable[ratelimit.GCRAState](1000, recovered)
	if err != nil {
		t.Fatal(err)
	}
	if adviseHugePages(small.buckets) {
		t.Errorf("a table of %d buckets was advised", len(small.buckets))
	}
}
