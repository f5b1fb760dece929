//go:build linux

package warm

import (
	"os"
	"runtime"
	"syscall"
	"testing"
)

// threadFaults returns the calling thread's minor page faults so far.
func threadFaults(t *testing.T) int64 {
	t.Helper()
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		t.Skipf("getrusage(RUSAGE_THREAD): %v", err)
	}
	return int64(ru.Minflt)
}

// TestFillFaultsAhead checks what Fill is for: memory lent from the pool
// it filled is written without a page fault, where fresh memory faults
// on every page.
func TestFillFaultsAhead(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	Reset()
	defer Reset()
	page := os.Getpagesize()
	n := 4 * MinGift
	pages := int64(n / page)

	// The counter counts: fresh anonymous memory faults on each page.
	fresh, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	defer syscall.Munmap(fresh)
	before := threadFaults(t)
	for i := 0; i < n; i += page {
		fresh[i] = 1
	}
	if got := threadFaults(t) - before; got < pages/2 {
		t.Skipf("writing %d fresh pages counted %d faults: the counter does not see them here", pages, got)
	}

	Fill(n, nil)
	if Free() != n {
		t.Fatalf("Free after Fill(%d): %d", n, Free())
	}
	before = threadFaults(t)
	lent := Uint64s(n / 8) // every byte Fill wrote, cleared by the take
	for i := 0; i < len(lent); i += page / 8 {
		lent[i] = 1
	}
	if got := threadFaults(t) - before; got > pages/8 {
		t.Fatalf("writing the %d pages lent from a filled pool took %d page faults, want at most %d", pages, got, pages/8)
	}
}
