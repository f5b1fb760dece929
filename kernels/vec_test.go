package kernels

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
)

// eachInnerLoops runs fn once per inner-loop unit this build and CPU have
// (scalar, then avx2 and avx512 where present), so the agreement tests
// hold every implementation to the reference, not only the fastest.
func eachInnerLoops(t *testing.T, fn func(t *testing.T)) {
	old := vec
	t.Cleanup(func() { vec = old })
	for _, name := range AvailableInnerLoops() {
		if err := SetInnerLoops(name); err != nil {
			t.Fatal(err)
		}
		t.Run(name, fn)
	}
}

func TestSetInnerLoops(t *testing.T) {
	old := vec
	t.Cleanup(func() { vec = old })
	avail := AvailableInnerLoops()
	if len(avail) == 0 || avail[0] != "scalar" {
		t.Fatalf("AvailableInnerLoops() = %v, want scalar first", avail)
	}
	for _, name := range avail {
		if err := SetInnerLoops(name); err != nil {
			t.Errorf("SetInnerLoops(%q): %v", name, err)
		}
		if got := InnerLoops(); got != name && got != name+"+pext" {
			t.Errorf("after SetInnerLoops(%q), InnerLoops() = %q", name, got)
		}
	}
	if err := SetInnerLoops("sse9"); err == nil {
		t.Error("SetInnerLoops(sse9) did not fail")
	}
	for _, name := range []string{"avx2", "avx512"} {
		if !slices.Contains(avail, name) {
			if err := SetInnerLoops(name); err == nil {
				t.Errorf("SetInnerLoops(%q) succeeded on a CPU or build without it", name)
			}
		}
	}
}

// TestPEXTDecode holds the PEXT extraction to ALTOMode.Decode on every
// mode of tensors whose linear index is below and above 64 bits.
func TestPEXTDecode(t *testing.T) {
	if !usePEXT {
		t.Skip("no fast PEXT here (or a purego build)")
	}
	rng := rand.New(rand.NewPCG(8, 8))
	for _, dims := range [][]int{{300, 41, 7}, {1 << 14, 1 << 14, 1<<14 - 3, 1 << 14, 1 << 10}} {
		x := randomCOO(rng, dims, 3000)
		a, err := formats.NewALTO(x, 0)
		if err != nil {
			t.Fatal(err)
		}
		for m := range a.Modes {
			e := &a.Modes[m]
			base := uint32(0)
			if a.BlockHigh != nil {
				base = e.FromHigh(a.BlockHigh[0])
			}
			lin := a.Lin[a.BlockPtr[0]:a.BlockPtr[1]]
			want, got := make([]uint32, len(lin)), make([]uint32, len(lin))
			e.Decode(want, lin, base)
			if !pextVec(got, lin, e.Lo, base) {
				t.Fatal("pextVec reported no PEXT although usePEXT is set")
			}
			if !slices.Equal(got, want) {
				t.Fatalf("dims %v mode %d: PEXT decode differs from ALTOMode.Decode", dims, m)
			}
		}
	}
}
