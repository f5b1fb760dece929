package decomp

import (
	"fmt"
	"math"
	"sort"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/internal/par"
)

// Φ forms: the layouts CP-APR computes Φ over (APROptions.Format).
const (
	// PhiCOO is the nonzeros sorted by the output mode, one copy per
	// mode, with the products of the other modes' factor rows cached per
	// nonzero while nnz·R <= 2^24.
	PhiCOO = "coo"
	// PhiCSF is a CSF tree per mode rooted at the output mode: products
	// of the upper levels' factor rows are formed once per fiber, not per
	// nonzero, and nothing grows with nnz·R.
	PhiCSF = "csf"
	// PhiAuto chooses per mode by timing both on the run's first outer
	// iteration (its first two inner iterations, one each), then keeps
	// the faster. The choice depends on the machine's timing, so two runs
	// with one seed may round differently; the default ("") does not.
	PhiAuto = "auto"
)

// PhiFormats are the Φ forms APROptions.Format accepts besides the
// default, "": PhiCOO while the products of every nonzero fit the cache
// (nnz·R <= 2^24), else PhiCSF. That is where the measured crossover lies
// on most tensors (docs/decomp.md), and it keeps a seeded run
// reproducible bit for bit.
var PhiFormats = []string{PhiAuto, PhiCOO, PhiCSF}

// defaultPhiFormat is the default's choice for x at rank R.
func defaultPhiFormat(nnz, R int) string {
	if nnz*R <= piCacheMax {
		return PhiCOO
	}
	return PhiCSF
}

func checkPhiFormat(f string) error {
	switch f {
	case "", PhiAuto, PhiCOO, PhiCSF:
		return nil
	}
	return fmt.Errorf("cp-apr: Φ format %q, expected one of %v", f, PhiFormats)
}

// csfPhi computes Φ of mode n over a CSF tree rooted at n. For a root
// fiber (output row i) with B's row b, a path through the levels below
// with factor rows a_1, ..., a_{N-1} (the leaf's last) has
// π = a_1 ∘ ... ∘ a_{N-1}, so the model value at the leaf is
// ⟨b ∘ a_1 ∘ ... ∘ a_{N-2}, a_{N-1}⟩ and its contribution to Φ(i) is
// x/m · π. Walking the tree, q_l = b ∘ a_1 ∘ ... ∘ a_l is formed once per
// fiber of level l, each leaf costs one dot product and one axpy of its
// own row, and the sums of the leaves under a fiber are multiplied by the
// fiber's row on the way up, once. Root fibers own distinct output rows,
// so goroutines take disjoint ranges of them, balanced by nonzeros.
type csfPhi struct {
	t      *formats.CSF
	splits []int // parts+1 root-fiber offsets
}

func newCSFPhi(conv *formats.Converter, n, parts int) (*csfPhi, error) {
	tf, err := conv.Format("csf", n)
	if err != nil {
		return nil, fmt.Errorf("CSF of mode %d: %w", n+1, err)
	}
	t := tf.(*formats.CSF)
	if t.ModeOrder[0] != n {
		return nil, fmt.Errorf("CSF of mode %d is rooted at mode %d", n+1, t.ModeOrder[0]+1)
	}
	return &csfPhi{t: t, splits: leafBalanced(t, parts)}, nil
}

// leafBalanced cuts t's root fibers into parts ranges of about equal
// numbers of leaves (nonzeros).
func leafBalanced(t *formats.CSF, parts int) []int {
	roots := len(t.FiberIdx[0])
	// first leaf of root fiber f, following the first-child pointers down.
	leafOf := func(f int) int {
		for l := range len(t.FiberPtr) {
			f = int(t.FiberPtr[l][f])
		}
		return f
	}
	nnz := len(t.Vals)
	splits := make([]int, parts+1)
	for p := 1; p < parts; p++ {
		target := nnz * p / parts
		splits[p] = max(splits[p-1], sort.Search(roots, func(f int) bool { return leafOf(f) >= target }))
	}
	splits[parts] = roots
	return splits
}

// compute sets phi (dims[n] x R) from b = A_n diag(λ) and the factors a
// (per mode, I_m x R row-major).
func (c *csfPhi) compute(a [][]float64, b, phi []float64, R int, eps float64) {
	t := c.t
	N := len(t.ModeOrder)
	clear(phi)
	sp := c.splits
	par.Range(len(sp)-1, len(sp)-1, func(part, _, _ int) {
		// q[l] and acc[l] per level below the root.
		q := make([][]float64, N)
		acc := make([][]float64, N)
		for l := range N {
			q[l], acc[l] = make([]float64, R), make([]float64, R)
		}
		for f := sp[part]; f < sp[part+1]; f++ {
			i := int(t.FiberIdx[0][f])
			copy(q[0], b[i*R:i*R+R])
			clear(acc[0])
			c.walk(a, 1, int(t.FiberPtr[0][f]), int(t.FiberPtr[0][f+1]), q, acc, R, eps)
			copy(phi[i*R:i*R+R], acc[0])
		}
	})
}

// walk adds to acc[l-1] the contributions of fibers lo to hi-1 of level
// l, below a path whose q (b times the rows above) is q[l-1].
func (c *csfPhi) walk(a [][]float64, l, lo, hi int, q, acc [][]float64, R int, eps float64) {
	t := c.t
	up, out := q[l-1][:R], acc[l-1][:R]
	fac := a[t.ModeOrder[l]]
	idx := t.FiberIdx[l]
	if l == len(t.ModeOrder)-1 {
		vals := t.Vals
		for k := lo; k < hi; k++ {
			row := fac[int(idx[k])*R : int(idx[k])*R+R]
			row = row[:len(up)]
			var m float64
			for r, v := range row {
				m += up[r] * v
			}
			w := float64(vals[k]) / math.Max(m, eps)
			for r, v := range row {
				out[r] += w * v
			}
		}
		return
	}
	ptr := t.FiberPtr[l]
	down, sum := q[l][:R], acc[l][:R]
	for f := lo; f < hi; f++ {
		row := fac[int(idx[f])*R : int(idx[f])*R+R]
		row = row[:len(up)]
		for r, v := range row {
			down[r] = up[r] * v
		}
		clear(sum)
		c.walk(a, l+1, int(ptr[f]), int(ptr[f+1]), q, acc, R, eps)
		for r, v := range row {
			out[r] += v * sum[r]
		}
	}
}
