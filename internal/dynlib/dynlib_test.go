//go:build (linux && (amd64 || arm64 || loong64)) || (darwin && (amd64 || arm64))

package dynlib

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestOpenMissingConcurrent loads missing libraries from many goroutines
// at once: every error names its file and says why (dlerror's "no such
// file"), which it did not when a goroutine changed threads between
// dlopen and dlerror (seen in CI).
func TestOpenMissingConcurrent(t *testing.T) {
	const workers, tries = 8, 200
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			name := fmt.Sprintf("/nonexistent/%d/libsparsetune-missing.so.1", w)
			for range tries {
				_, err := Open([]string{name})
				if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(strings.ToLower(err.Error()), "no such file") {
					errs <- fmt.Errorf("Open(%s): %v", name, err)
					return
				}
				runtime.Gosched()
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(nil); err == nil {
		t.Error("Open(nil): no error")
	}
	_, err := Open([]string{"/nonexistent/a.so", "/nonexistent/b.so"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/a.so") || !strings.Contains(err.Error(), "/nonexistent/b.so") {
		t.Errorf("Open of two missing files: %v, want both named", err)
	}
	if runtime.GOOS != "linux" {
		return
	}
	lib, err := Open([]string{"libc.so.6"})
	if err != nil {
		t.Fatalf("Open(libc.so.6): %v", err)
	}
	defer Close(lib)
	var strlen func(string) int
	if err := Resolve(lib, []Symbol{{&strlen, "strlen"}}); err != nil || strlen("abc") != 3 {
		t.Errorf("Resolve(strlen): %v", err)
	}
	if err := Resolve(lib, []Symbol{{&strlen, "no_such_symbol_xyz"}}); err == nil || !strings.Contains(err.Error(), "no_such_symbol_xyz") {
		t.Errorf("Resolve of a missing symbol: %v, want it named", err)
	}
}
