package formats

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestNewTensorFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dims := range [][]int{{9, 7}, {6, 5, 4}, {3, 4, 5, 6}} {
		x := genCOO(rng, dims, 200)
		orig := x.Clone()
		for _, name := range TensorFormatNames {
			for mode := range dims {
				f, err := NewTensorFormat(x, name, mode)
				if err != nil {
					t.Fatalf("%s mode %d: %v", name, mode, err)
				}
				if f.NNZ() != x.NNZ() || f.Bytes() <= 0 {
					t.Fatalf("%s mode %d: nnz %d bytes %d", name, mode, f.NNZ(), f.Bytes())
				}
				back := f.ToCOO()
				back.Sort()
				want := x.Clone()
				want.Sort()
				if !back.Equal(want) {
					t.Fatalf("%s mode %d: round trip differs", name, mode)
				}
				if name == "coo" && !f.(*COO).IsSortedBy(RootedOrder(len(dims), mode)...) {
					t.Fatalf("coo mode %d: not sorted by the mode first", mode)
				}
				if name == "csf" && f.(*CSF).Root() != mode {
					t.Fatalf("csf mode %d: rooted at %d", mode, f.(*CSF).Root())
				}
			}
		}
		if !x.Equal(orig) {
			t.Fatalf("input modified")
		}
	}
	x := genCOO(rng, []int{4, 4, 4}, 10)
	for _, tc := range []struct {
		name string
		mode int
		want string
	}{
		{"bsr", 0, "unknown tensor format"},
		{"coo", 3, "mode 4 out of range"},
		{"csf", -1, "mode 0 out of range"},
	} {
		if _, err := NewTensorFormat(x, tc.name, tc.mode); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s mode %d: error %v, want %q", tc.name, tc.mode, err, tc.want)
		}
	}
}

// BenchmarkNewTensorFormat measures the COO and CSF an MTTKRP of every mode
// runs on, built from unsorted and sorted input.
func BenchmarkNewTensorFormat(b *testing.B) {
	for _, bt := range formatBenchTensors(b) {
		for _, name := range []string{"coo", "csf"} {
			for n := range bt.x.Order() {
				b.Run(fmt.Sprintf("%s/%s/mode%d", bt.name, name, n+1), func(b *testing.B) {
					for b.Loop() {
						if _, err := NewTensorFormat(bt.x, name, n); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
