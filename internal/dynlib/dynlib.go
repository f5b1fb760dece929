//go:build (linux && (amd64 || arm64 || loong64)) || (darwin && (amd64 || arm64))

package dynlib

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/ebitengine/purego"
)

// Symbol is one entry point to resolve: a pointer to a function variable
// and the C name.
type Symbol struct {
	Fn   any
	Name string
}

// Open dlopens the first of names that loads and returns its handle, or
// an error naming every file tried and why it did not load.
func Open(names []string) (uintptr, error) {
	runtime.LockOSThread() // dlopen and dlerror on one thread (package doc)
	defer runtime.UnlockOSThread()
	var errs []error
	for _, name := range names {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		switch {
		case err == nil && h != 0:
			return h, nil
		case err == nil:
			err = fmt.Errorf("%s: dlopen returned no handle", name)
		case !strings.Contains(err.Error(), name):
			err = fmt.Errorf("%s: %v", name, err)
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return 0, errors.New("no library names to try")
	}
	return 0, errors.Join(errs...)
}

// Resolve registers every symbol of syms from library lib, or returns an
// error naming the first one missing.
func Resolve(lib uintptr, syms []Symbol) error {
	runtime.LockOSThread() // dlsym and dlerror on one thread (package doc)
	defer runtime.UnlockOSThread()
	for _, s := range syms {
		addr, err := purego.Dlsym(lib, s.Name)
		if err != nil || addr == 0 {
			return fmt.Errorf("symbol %s missing: %v", s.Name, err)
		}
		purego.RegisterFunc(s.Fn, addr)
	}
	return nil
}

// Close releases a library Open returned, once its functions are no
// longer called.
func Close(lib uintptr) { _ = purego.Dlclose(lib) }
