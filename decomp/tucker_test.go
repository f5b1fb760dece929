package decomp

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/kernels"
)

// plantedTucker builds a tensor of multilinear rank ranks that is sparse:
// each factor is nonzero only on a random frac of its rows (Gaussian
// entries there), so the tensor is zero outside the box of those rows,
// and the box is stored in full.
func plantedTucker(dims, ranks []int, frac float64, seed uint64) (*formats.COO, []*kernels.Matrix) {
	rng := rand.New(rand.NewPCG(seed, 13))
	N := len(dims)
	fs := make([]*kernels.Matrix, N)
	support := make([][]int, N)
	for m, I := range dims {
		k := max(ranks[m]+2, int(frac*float64(I)))
		support[m] = rng.Perm(I)[:k]
		slices.Sort(support[m])
		fs[m] = kernels.NewMatrix(I, ranks[m])
		for _, i := range support[m] {
			for r := range ranks[m] {
				fs[m].Data[i*ranks[m]+r] = float32(rng.NormFloat64())
			}
		}
	}
	coreSize := 1
	for _, r := range ranks {
		coreSize *= r
	}
	core := make([]float64, coreSize)
	for i := range core {
		core[i] = rng.NormFloat64()
	}
	boxDims := make([]int, N)
	for m := range N {
		boxDims[m] = len(support[m])
	}
	x, _ := formats.NewCOO(dims, int(formats.Cells(boxDims)))
	idx := make([]uint32, N)
	forEachCell(boxDims, func(b []int) {
		var v float64
		c := 0
		forEachCell(ranks, func(r []int) {
			p := core[c]
			c++
			for m := range N {
				p *= float64(fs[m].At(support[m][b[m]], r[m]))
			}
			v += p
		})
		for m := range N {
			idx[m] = uint32(support[m][b[m]])
		}
		x.Append(idx, float32(v))
	})
	return x, fs
}

// subspaceMatch returns ‖Qᵀ U‖_F² / R for Q an orthonormal basis of
// truth's columns: 1 when U spans the same subspace.
func subspaceMatch(truth, u *kernels.Matrix) float64 {
	q := cloneMatrix(truth)
	orthonormalise(q)
	var s float64
	for a := range q.Cols {
		for b := range u.Cols {
			var d float64
			for i := range q.Rows {
				d += float64(q.At(i, a)) * float64(u.At(i, b))
			}
			s += d * d
		}
	}
	return s / float64(u.Cols)
}

// tuckerDense returns the dense tensor of a Tucker result.
func tuckerDense(dims []int, r *TuckerResult) []float64 {
	out := make([]float64, 0, int(formats.Cells(dims)))
	forEachCell(dims, func(i []int) {
		var v float64
		c := 0
		forEachCell(r.Ranks, func(k []int) {
			p := r.Core[c]
			c++
			for m, f := range r.Factors {
				p *= float64(f.At(i[m], k[m]))
			}
			v += p
		})
		out = append(out, v)
	})
	return out
}

func TestTuckerPlanted(t *testing.T) {
	cases := []struct {
		name  string
		dims  []int
		ranks []int
		init  string
		fiber string
	}{
		{"hosvd-csr", []int{30, 40, 50}, []int{3, 4, 5}, InitHOSVD, "csr"},
		{"random-coo", []int{30, 40, 50}, []int{2, 3, 2}, InitRandom, "coo"},
		{"hosvd-hyb", []int{25, 20, 30}, []int{4, 2, 3}, InitHOSVD, "hyb"},
		{"order4-ell", []int{10, 12, 9, 11}, []int{2, 3, 2, 2}, InitHOSVD, "ell"},
		{"order4-random", []int{10, 12, 9, 11}, []int{3, 2, 2, 3}, InitRandom, "csr"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, truth := plantedTucker(c.dims, c.ranks, 0.3, uint64(i+1))
			res, err := TuckerHOOI(x, Options{Ranks: c.ranks, Iters: 100, Tol: 1e-9, Init: c.init, FiberFormat: c.fiber, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			checkFinite(t, res.Factors, res.Core)
			t.Logf("nnz %d, %d iterations, fit %.6f", x.NNZ(), res.Iterations, res.Fit)
			if res.Fit < 0.99 {
				t.Fatalf("fit %.6f, want ≥ 0.99", res.Fit)
			}
			for m := range truth {
				if s := subspaceMatch(truth[m], res.Factors[m]); s < 0.99 {
					t.Fatalf("mode %d: subspace match %.4f", m+1, s)
				}
				// Orthonormal columns.
				g := gram(res.Factors[m], 1)
				for a := range c.ranks[m] {
					for b := range c.ranks[m] {
						want := 0.0
						if a == b {
							want = 1
						}
						if math.Abs(g[a*c.ranks[m]+b]-want) > 1e-5 {
							t.Fatalf("mode %d: UᵀU[%d,%d] = %v", m+1, a, b, g[a*c.ranks[m]+b])
						}
					}
				}
			}
			if want := 1 - relDiff(tuckerDense(x.Dims, res), dense(x)); math.Abs(want-res.Fit) > 1e-3 {
				t.Fatalf("reported fit %.6f, dense fit %.6f", res.Fit, want)
			}
		})
	}
}

// TestTTMChainMatchesDense holds the CPU TTM chain of every mode, in every
// fiber format, to the definition computed densely.
func TestTTMChainMatchesDense(t *testing.T) {
	for _, dims := range [][]int{{4, 5, 6}, {3, 4, 2, 5}, {7, 3, 5}} {
		x := randomSparse(dims, 0.4, uint64(len(dims)+dims[0]))
		N := len(dims)
		ranks := make([]int, N)
		for m := range ranks {
			ranks[m] = 1 + (m+dims[0])%3
		}
		fs := randomFactors(dims, ranks, 5)
		d := dense(x)
		for _, ff := range []string{"csr", "coo", "ell", "hyb"} {
			cpu, err := NewCPU(x, nil, ff, 2)
			if err != nil {
				t.Fatal(err)
			}
			for n := range N {
				P := 1
				var others []int
				for m := range N {
					if m != n {
						P *= ranks[m]
						others = append(others, ranks[m])
					}
				}
				want := make([]float64, dims[n]*P)
				k := 0
				forEachCell(dims, func(i []int) {
					v := d[k]
					k++
					if v == 0 {
						return
					}
					c := 0
					forEachCell(others, func(r []int) {
						p := v
						j := 0
						for m := range N {
							if m != n {
								p *= float64(fs[m].At(i[m], r[j]))
								j++
							}
						}
						want[i[n]*P+c] += p
						c++
					})
				})
				out := kernels.NewMatrix(dims[n], P)
				for k := range out.Data {
					out.Data[k] = 99 // must be overwritten
				}
				if err := cpu.TTMChain(n, fs, out); err != nil {
					t.Fatal(err)
				}
				for k, w := range want {
					if math.Abs(float64(out.Data[k])-w) > 1e-4*(1+math.Abs(w)) {
						t.Fatalf("%v %s mode %d: entry %d is %v, want %v", dims, ff, n+1, k, out.Data[k], w)
					}
				}
			}
		}
	}
}

// TestTuckerRealTensor runs a few iterations on a real tensor: HOOI's fit
// does not decrease.
func TestTuckerRealTensor(t *testing.T) {
	x := realTensor(t, "kg_umls.tns")
	var fits []float64
	res, err := TuckerHOOI(x, Options{Ranks: []int{5, 5, 4}, Iters: 5, Progress: func(s IterStat) { fits = append(fits, s.Fit) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fits %v", fits)
	if len(fits) != res.Iterations || res.Iterations < 2 {
		t.Fatalf("fits %v, %d iterations", fits, res.Iterations)
	}
	for i := 1; i < len(fits); i++ {
		if fits[i] < fits[i-1]-1e-5 {
			t.Fatalf("fit dropped: %v", fits)
		}
	}
	if fits[0] <= 0 || fits[len(fits)-1] > 1 {
		t.Fatalf("fits %v", fits)
	}
	if len(res.Core) != 100 {
		t.Fatalf("core of %d entries", len(res.Core))
	}
}

// TestTuckerLargeSVDPaths runs the Gram-matrix paths of the singular
// vectors (Y too large for the direct SVD) against the direct one.
func TestTuckerLargeSVDPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, shape := range [][2]int{{3000, 40}, {40, 3000}} {
		y := kernels.NewMatrix(shape[0], shape[1])
		// Rank-3 signal plus small noise, so the leading subspace is
		// well defined.
		a := make([][3]float64, shape[0])
		b := make([][3]float64, shape[1])
		for i := range a {
			a[i] = [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		}
		for j := range b {
			b[j] = [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		}
		for i := range shape[0] {
			for j := range shape[1] {
				y.Data[i*shape[1]+j] = float32(3*a[i][0]*b[j][0] + 2*a[i][1]*b[j][1] + a[i][2]*b[j][2] + 0.01*rng.NormFloat64())
			}
		}
		if shape[0]*shape[1] <= svdDirectMax {
			t.Fatal("test matrix too small for the Gram path")
		}
		u, err := leadingLeftSingular(y, 3, 2)
		if err != nil {
			t.Fatal(err)
		}
		truth := kernels.NewMatrix(shape[0], 3)
		for i := range a {
			for r := range 3 {
				truth.Data[i*3+r] = float32(a[i][r])
			}
		}
		if s := subspaceMatch(truth, u); s < 0.999 {
			t.Fatalf("%v: subspace match %v", shape, s)
		}
	}
}

func TestTuckerErrors(t *testing.T) {
	x := randomSparse([]int{4, 5, 6}, 0.3, 1)
	cases := []struct {
		ranks []int
		want  string
	}{
		{nil, "needs 3 ranks"},
		{[]int{2, 2}, "needs 3 ranks"},
		{[]int{2, 0, 2}, "rank of mode 2 must be >= 1"},
		{[]int{5, 2, 2}, "rank 5 of mode 1 exceeds its dim 4"},
		{[]int{4, 1, 2}, "rank 4 of mode 1 exceeds 2, the product of the other ranks"},
	}
	for _, c := range cases {
		_, err := TuckerHOOI(x, Options{Ranks: c.ranks})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ranks %v: error %v, want one line containing %q", c.ranks, err, c.want)
		}
	}
	// A core of 10^24 values (its size overflowed an int) and chains of
	// 10^21 columns: refused, not allocated.
	dims := []int{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}
	big, _ := formats.NewCOO(dims, 1)
	big.Append(make([]uint32, len(dims)), 1)
	if _, err := TuckerHOOI(big, Options{Ranks: dims, Init: InitRandom}); err == nil || !strings.Contains(err.Error(), "Tucker: the factor matrices, their work copies and the core and the SVDs' Gram matrices need") {
		t.Errorf("ranks 1000 of order 8: %v", err)
	}
	if _, err := TuckerHOOI(x, Options{Ranks: []int{2, 2, 2}, FiberFormat: "csf"}); err == nil || !strings.Contains(err.Error(), "SpTTM format") {
		t.Errorf("fiber format csf: %v", err)
	}
}

func TestTuckerDeterministic(t *testing.T) {
	x := randomSparse([]int{20, 25, 30}, 0.05, 9)
	for _, init := range []string{InitRandom, InitHOSVD} {
		opts := Options{Ranks: []int{3, 4, 2}, Iters: 4, Seed: 7, Init: init, Threads: 2}
		a, err := TuckerHOOI(x, opts)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := TuckerHOOI(x, opts)
		if a.Fit != b.Fit || !slices.Equal(a.Core, b.Core) || !slices.Equal(a.Factors[1].Data, b.Factors[1].Data) {
			t.Fatalf("%s: two runs differ", init)
		}
	}
}

// TestOrthonormalise gives dependent and zero columns: the result must
// still have orthonormal columns, spanning the independent ones.
func TestOrthonormalise(t *testing.T) {
	a := kernels.NewMatrix(5, 4)
	for i := range 5 {
		a.Data[i*4] = float32(i + 1)
		a.Data[i*4+1] = float32(2 * (i + 1)) // twice column 0
		a.Data[i*4+3] = float32(i * i)
	}
	orig := cloneMatrix(a)
	orthonormalise(a)
	g := gram(a, 1)
	for j := range 4 {
		for k := range 4 {
			want := 0.0
			if j == k {
				want = 1
			}
			if math.Abs(g[j*4+k]-want) > 1e-6 {
				t.Fatalf("QᵀQ[%d,%d] = %v", j, k, g[j*4+k])
			}
		}
	}
	// Column 0 spans the original column 0 (up to sign, positive here).
	var d float64
	for i := range 5 {
		d += float64(a.At(i, 0)) * float64(orig.At(i, 0))
	}
	if math.Abs(d-math.Sqrt(55)) > 1e-5 {
		t.Fatalf("first column not the normalised original: ⟨q, a⟩ = %v", d)
	}
}

// TestTuckerDegenerate: a single nonzero, and a tensor far too sparse for
// its ranks (every TTM chain rank-deficient, through the Gram route), must
// give finite, orthonormal factors.
func TestTuckerDegenerate(t *testing.T) {
	one, _ := formats.NewCOO([]int{3, 4, 5}, 1)
	one.Append([]uint32{0, 1, 2}, 3)
	sparse := randomSparse([]int{300, 300, 300}, 2e-5, 1)
	cases := []struct {
		x     *formats.COO
		ranks []int
		init  string
	}{
		{one, []int{2, 2, 2}, InitHOSVD},
		{one, []int{2, 2, 2}, InitRandom},
		{sparse, []int{20, 20, 20}, InitHOSVD},
	}
	for _, c := range cases {
		res, err := TuckerHOOI(c.x, Options{Ranks: c.ranks, Iters: 3, Init: c.init})
		if err != nil {
			t.Fatal(err)
		}
		checkFinite(t, res.Factors, res.Core)
		for m, f := range res.Factors {
			g := gram(f, 1)
			R := f.Cols
			for a := range R {
				if math.Abs(g[a*R+a]-1) > 1e-4 {
					t.Fatalf("%v mode %d: column %d has norm² %v", c.x.Dims, m+1, a, g[a*R+a])
				}
			}
		}
		if math.IsNaN(res.Fit) || res.Fit < 0 || res.Fit > 1 {
			t.Fatalf("fit %v", res.Fit)
		}
	}
}
