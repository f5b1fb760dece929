package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
)

// spttmPlans builds the SpTTM plan of f in every format and variant: COO,
// CSR, ELL, HYB at its default width, at width 0 (all remainder) and at the
// longest row (no remainder).
func spttmPlans(t testing.TB, f *formats.FiberMatrix, rank, threads int) []*SpTTM {
	t.Helper()
	var out []*SpTTM
	add := func(name string, x formats.FiberFormat) {
		t.Helper()
		p, err := NewSpTTM(x, rank, threads)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p.format = name // label the variant in failure messages
		out = append(out, p)
	}
	for _, name := range formats.FiberFormatNames {
		x, err := formats.NewFiberFormat(f, name)
		if err != nil {
			t.Fatal(err)
		}
		add(name, x)
	}
	add("hyb-w0", formats.NewHYB(f, 0))
	add("hyb-wmax", formats.NewHYB(f, f.MaxRowLen()))
	return out
}

// checkSpTTM runs every format's plan for every mode and rank of x against
// the reference.
func checkSpTTM(t *testing.T, x *formats.COO, ranks []int, threads int, rng *rand.Rand) {
	t.Helper()
	for mode := range x.Order() {
		f, err := formats.NewFiberMatrix(x, mode, formats.DefaultSliceMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		for _, R := range ranks {
			ut := randomFactors(rng, []int{x.Dims[mode]}, R)[0]
			want, err := SpTTMReference(f, ut)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range spttmPlans(t, f, R, threads) {
				out := NewMatrix(f.Rows(), R)
				for i := range out.Data { // Run must overwrite, not add
					out.Data[i] = float32(math.NaN())
				}
				if err := p.Run(out, ut); err != nil {
					t.Fatalf("%s mode %d R %d: %v", p.Format(), mode, R, err)
				}
				if e := relErr(out.Data, want); !(e <= mttkrpTol) {
					t.Errorf("%s mode %d R %d threads %d (parts %d): relative error %.3g > %g",
						p.Format(), mode, R, threads, p.Parts(), e, mttkrpTol)
				}
			}
		}
	}
}

func TestSpTTMRandom(t *testing.T) {
	lowGrain(t, 64)
	cases := []struct {
		name string
		dims []int
		nnz  int
	}{
		{"order2", []int{300, 41}, 2000},
		{"order2-dim1", []int{1, 500}, 700},
		{"order3", []int{60, 200, 35}, 3000},
		{"order3-dim1", []int{50, 1, 70}, 1500},
		{"order3-skewed", []int{3, 5000, 4}, 2500},
		{"order4", []int{20, 31, 17, 300}, 3000},
		{"order5", []int{9, 13, 6, 11, 40}, 2500},
		{"order3-tiny", []int{4, 3, 2}, 5},
		{"order4-empty", []int{4, 3, 2, 5}, 0},
	}
	eachInnerLoops(t, func(t *testing.T) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(i), 11))
				x := randomCOO(rng, c.dims, c.nnz)
				for _, threads := range []int{1, 2, 3} {
					checkSpTTM(t, x, []int{1, 7, 16, 64}, threads, rng)
				}
			})
		}
	})
}

// TestSpTTMWideRanks covers ranks past one 64-column block and every block
// width.
func TestSpTTMWideRanks(t *testing.T) {
	lowGrain(t, 100)
	eachInnerLoops(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 13))
		x := randomCOO(rng, []int{40, 50, 60}, 1500)
		checkSpTTM(t, x, []int{2, 3, 31, 65, 127, 200}, 2, rng)
	})
}

// TestSpTTMRanks checks the rank blocks of the plans (spttmBlocks): on
// the vector loops a pass per 64 columns at any rank, the last vector of
// a block masked where the rank ends inside it (spttmPiece); on the
// portable loops the greedy split. Every format must agree with the
// reference at every rank, set every element of Y, write nothing outside
// it and leave Uᵀ as it was.
func TestSpTTMRanks(t *testing.T) {
	lowGrain(t, 64)
	rng := rand.New(rand.NewPCG(6, 9))
	x := randomCOO(rng, []int{90, 7, 300}, 3000)
	f, err := formats.NewFiberMatrix(x, 2, formats.DefaultSliceMode(2))
	if err != nil {
		t.Fatal(err)
	}
	const guard = 64 // floats either side of Y, which must stay as they are
	eachInnerLoops(t, func(t *testing.T) {
		for _, R := range []int{1, 2, 4, 7, 8, 9, 12, 15, 16, 17, 20, 24, 31, 33, 40, 48, 63, 64, 65, 100, 130} {
			for _, p := range spttmPlans(t, f, R, 2) {
				covered := 0
				for _, c := range p.blocks {
					pow2 := c.w&(c.w-1) == 0
					if c.r0 != covered || c.w < 1 || c.w > maxWidth || (vec == vecScalar && !pow2) {
						t.Errorf("%s R %d on %s: blocks %v", p.Format(), R, vec, p.blocks)
						break
					}
					covered += c.w
				}
				if covered != R {
					t.Errorf("%s R %d on %s: blocks %v cover %d columns", p.Format(), R, vec, p.blocks, covered)
				}
				if vec != vecScalar && len(p.blocks) != (R+maxWidth-1)/maxWidth {
					t.Errorf("%s R %d on %s: %d blocks, want one per %d columns", p.Format(), R, vec, len(p.blocks), maxWidth)
				}
			}
			ut := randomFactors(rng, []int{x.Dims[2]}, R)[0]
			before := slices.Clone(ut.Data)
			wantY, err := SpTTMReference(f, ut)
			if err != nil {
				t.Fatal(err)
			}
			for _, threads := range []int{1, 3} {
				for _, p := range spttmPlans(t, f, R, threads) {
					buf := make([]float32, guard+f.Rows()*R+guard)
					for i := range buf {
						buf[i] = float32(math.NaN())
					}
					out := &Matrix{Rows: f.Rows(), Cols: R, Data: buf[guard : guard+f.Rows()*R : guard+f.Rows()*R]}
					if err := p.Run(out, ut); err != nil {
						t.Fatal(err)
					}
					if e := relErr(out.Data, wantY); !(e <= mttkrpTol) {
						t.Errorf("%s R %d threads %d (parts %d) on %s: relative error %.3g > %g", p.Format(), R, threads, p.Parts(), vec, e, mttkrpTol)
					}
					for i, v := range slices.Concat(buf[:guard], buf[guard+f.Rows()*R:]) {
						if !math.IsNaN(float64(v)) {
							t.Errorf("%s R %d threads %d on %s: wrote %g outside Y (guard float %d)", p.Format(), R, threads, vec, v, i)
							break
						}
					}
				}
			}
			if !slices.Equal(ut.Data, before) {
				t.Errorf("R %d on %s: Uᵀ changed by Run", R, vec)
			}
		}
	})
}

// TestSpTTMLongFiber: one fiber far longer than the rest lands in one part
// and makes ELL mostly padding; every format must still agree.
func TestSpTTMLongFiber(t *testing.T) {
	lowGrain(t, 16)
	rng := rand.New(rand.NewPCG(4, 4))
	x := randomCOO(rng, []int{200, 30, 20}, 800)
	for i := range 200 {
		x.Append([]uint32{uint32(i), 7, 3}, 1) // the mode-0 fiber at (7, 3) is full
	}
	eachInnerLoops(t, func(t *testing.T) { checkSpTTM(t, x, []int{16}, 3, rng) })
}

func TestSpTTMRealTensors(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 15))
	for _, path := range realTensors(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".tns")
		t.Run(name, func(t *testing.T) {
			x, err := formats.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ranks := []int{1, 7, 16, 64}
			if testing.Short() && x.NNZ() > 50000 {
				ranks = []int{7, 16}
			}
			checkSpTTMReal(t, x, ranks, rng)
		})
	}
}

// checkSpTTMReal is checkSpTTM without ELL where ELL would be too padded
// to build (formats.MaxELLSlotsPerNNZ), as on knowledge graphs whose
// relation mode makes a few fibers enormous.
func checkSpTTMReal(t *testing.T, x *formats.COO, ranks []int, rng *rand.Rand) {
	t.Helper()
	for mode := range x.Order() {
		f, err := formats.NewFiberMatrix(x, mode, formats.DefaultSliceMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		names := []string{"coo", "csr", "hyb"}
		if int64(f.Rows())*int64(f.MaxRowLen()) <= formats.MaxELLSlotsPerNNZ*int64(f.NNZ()) {
			names = append(names, "ell")
		}
		for _, R := range ranks {
			ut := randomFactors(rng, []int{x.Dims[mode]}, R)[0]
			want, err := SpTTMReference(f, ut)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range names {
				ff, err := formats.NewFiberFormat(f, name)
				if err != nil {
					t.Fatal(err)
				}
				p, err := NewSpTTM(ff, R, 2)
				if err != nil {
					t.Fatal(err)
				}
				out := NewMatrix(f.Rows(), R)
				if err := p.Run(out, ut); err != nil {
					t.Fatal(err)
				}
				if e := relErr(out.Data, want); !(e <= mttkrpTol) {
					t.Errorf("%s mode %d R %d: relative error %.3g", name, mode, R, e)
				}
			}
		}
	}
}

// TestSpTTMReuse runs each plan several times with different factors.
func TestSpTTMReuse(t *testing.T) {
	lowGrain(t, 64)
	rng := rand.New(rand.NewPCG(9, 19))
	x := randomCOO(rng, []int{30, 40, 50}, 2000)
	f, err := formats.NewFiberMatrix(x, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range spttmPlans(t, f, 16, 2) {
		out := NewMatrix(f.Rows(), 16)
		for range 3 {
			ut := randomFactors(rng, []int{40}, 16)[0]
			want, _ := SpTTMReference(f, ut)
			if err := p.Run(out, ut); err != nil {
				t.Fatal(err)
			}
			if e := relErr(out.Data, want); e > mttkrpTol {
				t.Fatalf("%s: relative error %.3g on a reused plan", p.Format(), e)
			}
		}
	}
}

// TestSpTTMAllocs checks that a plan's steady state allocates nothing.
func TestSpTTMAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts are not meaningful under -cover or -race")
	}
	lowGrain(t, 64)
	rng := rand.New(rand.NewPCG(1, 21))
	x := randomCOO(rng, []int{30, 40, 50, 7}, 3000)
	for _, R := range []int{7, 16} {
		for mode := range x.Order() {
			f, err := formats.NewFiberMatrix(x, mode, formats.DefaultSliceMode(mode))
			if err != nil {
				t.Fatal(err)
			}
			ut := randomFactors(rng, []int{x.Dims[mode]}, R)[0]
			for _, p := range spttmPlans(t, f, R, 2) {
				out := NewMatrix(f.Rows(), R)
				if n := testing.AllocsPerRun(20, func() { _ = p.Run(out, ut) }); n != 0 {
					t.Errorf("%s mode %d R %d: %v allocations per Run, want 0", p.Format(), mode, R, n)
				}
			}
		}
	}
}

func TestSpTTMErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 23))
	x := randomCOO(rng, []int{5, 6, 7}, 50)
	f, err := formats.NewFiberMatrix(x, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	csr := formats.NewCSR(f)
	if _, err := NewSpTTM(csr, 0, 1); err == nil || !strings.Contains(err.Error(), "rank must be at least 1") {
		t.Errorf("rank 0: %v", err)
	}
	if _, err := NewSpTTM(nil, 4, 1); err == nil {
		t.Error("nil format accepted")
	}
	p, err := NewSpTTM(csr, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	good, ut := NewMatrix(f.Rows(), 4), NewMatrix(6, 4)
	for _, tc := range []struct {
		name    string
		out, ut *Matrix
		want    string
	}{
		{"nil factor", good, nil, "factor: matrix is nil"},
		{"factor rows", good, NewMatrix(5, 4), "factor: matrix is 5x4, expected 6x4"},
		{"factor cols", good, NewMatrix(6, 3), "factor: matrix is 6x3, expected 6x4"},
		{"output rows", NewMatrix(f.Rows()+1, 4), ut, fmt.Sprintf("output: matrix is %dx4, expected %dx4", f.Rows()+1, f.Rows())},
		{"short data", &Matrix{Rows: f.Rows(), Cols: 4}, ut, "holds 0 values"},
	} {
		if err := p.Run(tc.out, tc.ut); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if p.Flops() != 2*float64(f.NNZ())*4 || p.Bytes() != float64(csr.Bytes())+4*float64(6+f.Rows())*4 {
		t.Errorf("flops %g bytes %g", p.Flops(), p.Bytes())
	}
}
