package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sparsetune/sparsetune/hetero"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// gemm32 is gonum's float32 GEMM, the product the builtin runtime used
// before its sparse product, kept as the reference and the benchmark's
// baseline.
func gemm32(c, a, b []float32, m, k, n int) {
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, blas32.General{Rows: m, Cols: k, Stride: k, Data: a},
		blas32.General{Rows: k, Cols: n, Stride: n, Data: b}, 0, blas32.General{Rows: m, Cols: n, Stride: n, Data: c})
}

// matMulCases are the network's product shapes: the GCN layers, the
// outer products of masks, the heads.
var matMulCases = []struct {
	name    string
	m, k, n int
	zeros   float64 // fraction of a's entries that are zero
}{
	{"32x32x16", 32, 32, 16, 0.5},
	{"32x32x5", 32, 32, 5, 0.3},
	{"32x1x32", 32, 1, 32, 0},
	{"1x32x5", 1, 32, 5, 0.3},
	{"1x32x4", 1, 32, 4, 0.2},
	{"1x151x64", 1, 151, 64, 0.2},
	{"1x64x32", 1, 64, 32, 0.5},
}

func matMulOperands(m, k, n int, zeros float64) (a, b []float32) {
	rng := rand.New(rand.NewPCG(uint64(m*k), uint64(n)))
	a, b = make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		if rng.Float64() >= zeros {
			a[i] = rng.Float32()*2 - 1
		}
	}
	for i := range b {
		b[i] = rng.Float32()*2 - 1
	}
	return a, b
}

// testMachine returns a machine with product buffers for m x k left
// operands.
func testMachine(m, k int) *machine {
	return &machine{bWide: make([]float32, k*8), cWide: make([]float32, m*8)}
}

// TestMatMulMatchesGEMM holds the machine's product, widened columns
// included, to gonum's GEMM on the network's shapes.
func TestMatMulMatchesGEMM(t *testing.T) {
	for _, c := range matMulCases {
		a, b := matMulOperands(c.m, c.k, c.n, c.zeros)
		mc := testMachine(c.m, c.k)
		want := make([]float32, c.m*c.n)
		gemm32(want, a, b, c.m, c.k, c.n)
		got := make([]float32, c.m*c.n)
		for i := range got {
			got[i] = float32(math.NaN())
		}
		mc.matMul(got, a, b, c.m, c.k, c.n)
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 1e-5*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%s: c[%d] = %v, GEMM %v", c.name, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkMatMul compares the builtin runtime's product with gonum's
// GEMM on the network's shapes.
func BenchmarkMatMul(b *testing.B) {
	for _, c := range matMulCases {
		x, y := matMulOperands(c.m, c.k, c.n, c.zeros)
		out := make([]float32, c.m*c.n)
		mc := testMachine(c.m, c.k)
		b.Run(c.name+"/builtin", func(b *testing.B) {
			for b.Loop() {
				mc.matMul(out, x, y, c.m, c.k, c.n)
			}
		})
		b.Run(c.name+"/gonum", func(b *testing.B) {
			for b.Loop() {
				gemm32(out, x, y, c.m, c.k, c.n)
			}
		})
	}
}

// TestSlotsNeverOverlapLiveValues checks the buffer sharing of the
// default models: no step writes into the slot of a value that is read
// at or after it, and every output keeps a buffer of its own.
func TestSlotsNeverOverlapLiveValues(t *testing.T) {
	for _, op := range []hetero.Op{hetero.SpTTM, hetero.MTTKRP} {
		m, err := DefaultModel(op)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.graph(); err != nil {
			t.Fatal(err)
		}
		p := m.prog
		last := make([]int, len(p.shapes))
		for i := range last {
			last[i] = -1
		}
		for i, st := range p.steps {
			for _, id := range st.in {
				last[id] = i
			}
		}
		born := make([]int, len(p.shapes))
		for i, st := range p.steps {
			born[st.out] = i
		}
		for _, id := range p.outputs {
			if p.slot[id] >= 0 {
				t.Errorf("%v: output %d shares slot %d", op, id, p.slot[id])
			}
		}
		for i, st := range p.steps {
			k := p.slot[st.out]
			if k < 0 {
				continue
			}
			for v := range p.shapes {
				if v != st.out && p.slot[v] == k && born[v] < i && last[v] >= i {
					t.Fatalf("%v: step %d writes slot %d over value %d, read until step %d", op, i, k, v, last[v])
				}
			}
		}
		if len(p.slotSize) >= len(p.steps)/2 {
			t.Errorf("%v: %d slots for %d steps: the values do not share buffers", op, len(p.slotSize), len(p.steps))
		}
	}
}

// TestTranspose holds the blocked transpose to the definition on shapes
// around its eight-row bands.
func TestTranspose(t *testing.T) {
	for _, s := range [][2]int{{32, 32}, {1, 32}, {32, 1}, {9, 13}, {16, 8}, {7, 3}, {0, 4}} {
		r, c := s[0], s[1]
		x := make([]float32, r*c)
		for i := range x {
			x[i] = float32(i)
		}
		out := make([]float32, r*c)
		transpose(out, x, r, c)
		for i := range r {
			for j := range c {
				if out[j*r+i] != x[i*c+j] {
					t.Fatalf("%dx%d: out[%d][%d] = %v, want %v", r, c, j, i, out[j*r+i], x[i*c+j])
				}
			}
		}
	}
}
