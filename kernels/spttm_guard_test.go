//go:build linux

package kernels

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"

	"github.com/sparsetune/sparsetune/formats"
)

// guardedFloats returns n floats that end where an inaccessible page
// begins, so a loop that reads or writes one float past them faults, and
// a function that unmaps them.
func guardedFloats(t *testing.T, n int) ([]float32, func()) {
	t.Helper()
	page := syscall.Getpagesize()
	size := (4*n+page-1)/page*page + page
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	if err := syscall.Mprotect(mem[size-page:], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	end := size - page
	fl := unsafe.Slice((*float32)(unsafe.Pointer(&mem[end-4*n])), n)
	return fl, func() { syscall.Munmap(mem) }
}

// TestSpTTMGuardPage runs every format with Uᵀ and Y each ending at an
// inaccessible page, at ranks whose last vector is masked: a masked load
// or store that touched a lane past the row (the last row of Uᵀ, read by
// an entry of the last column, and the last row of Y) would fault.
func TestSpTTMGuardPage(t *testing.T) {
	lowGrain(t, 64)
	rng := rand.New(rand.NewPCG(3, 8))
	x := randomCOO(rng, []int{60, 9, 200}, 2000)
	for i := range 60 {
		x.Append([]uint32{uint32(i), 8, 199}, 1) // entries in the last column of every mode
	}
	eachInnerLoops(t, func(t *testing.T) {
		for mode := range x.Order() {
			f, err := formats.NewFiberMatrix(x, mode, formats.DefaultSliceMode(mode))
			if err != nil {
				t.Fatal(err)
			}
			for _, R := range []int{1, 4, 7, 9, 12, 15, 20, 24, 31, 33, 56, 63, 100} {
				utData, freeUT := guardedFloats(t, f.Cols()*R)
				outData, freeOut := guardedFloats(t, f.Rows()*R)
				ut := &Matrix{Rows: f.Cols(), Cols: R, Data: utData}
				copy(ut.Data, randomFactors(rng, []int{f.Cols()}, R)[0].Data)
				want, err := SpTTMReference(f, ut)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range spttmPlans(t, f, R, 2) {
					out := &Matrix{Rows: f.Rows(), Cols: R, Data: outData}
					if err := p.Run(out, ut); err != nil {
						t.Fatal(err)
					}
					if e := relErr(out.Data, want); !(e <= mttkrpTol) {
						t.Errorf("mode %d %s R %d on %s: relative error %.3g", mode, p.Format(), R, vec, e)
					}
				}
				freeUT()
				freeOut()
			}
		}
	})
}
