package decomp

import (
	"fmt"
	"math"

	"github.com/sparsetune/sparsetune/kernels"
)

// FMS returns the factor match score of two CP models [[la; a]] and
// [[lb; b]] of one tensor: 1 when they have the same components, up to
// order and scaling, less the further apart they are.
//
// Component r of a and p of b score
//
//	(1 - |ξ_r - ξ_p| / max(ξ_r, ξ_p)) · Π_m |cos(a_m(:, r), b_m(:, p))|
//
// where ξ is the component's weight: its λ times the norms of its columns
// (so the score does not depend on how a model is normalised). With both
// lambdas nil the weight term is left out and only directions count.
// Components are matched one to one to maximise the total score
// (exhaustively up to rank 8, greedily, best pair first, above) and the
// score is the matched total over the larger rank, so a missing or
// superfluous component costs 1/R.
func FMS(a []*kernels.Matrix, la []float64, b []*kernels.Matrix, lb []float64) (float64, error) {
	if len(a) != len(b) || len(a) == 0 {
		return 0, fmt.Errorf("fms: models of order %d and %d", len(a), len(b))
	}
	ra, rb := a[0].Cols, b[0].Cols
	for m := range a {
		if a[m].Rows != b[m].Rows || a[m].Cols != ra || b[m].Cols != rb {
			return 0, fmt.Errorf("fms: mode %d is %dx%d against %dx%d", m+1, a[m].Rows, a[m].Cols, b[m].Rows, b[m].Cols)
		}
	}
	useWeights := la != nil && lb != nil
	if useWeights && (len(la) != ra || len(lb) != rb) {
		return 0, fmt.Errorf("fms: %d and %d weights for ranks %d and %d", len(la), len(lb), ra, rb)
	}
	na, nb := colNorms(a), colNorms(b)
	weight := func(l []float64, norms [][]float64, r int) float64 {
		w := l[r]
		for _, n := range norms {
			w *= n[r]
		}
		return math.Abs(w)
	}
	score := make([][]float64, ra)
	for r := range ra {
		score[r] = make([]float64, rb)
		for p := range rb {
			s := 1.0
			for m := range a {
				var dot float64
				for i := range a[m].Rows {
					dot += float64(a[m].At(i, r)) * float64(b[m].At(i, p))
				}
				den := na[m][r] * nb[m][p]
				if den == 0 {
					s = 0
					break
				}
				s *= math.Abs(dot) / den
			}
			if useWeights {
				wa, wb := weight(la, na, r), weight(lb, nb, p)
				if big := max(wa, wb); big > 0 {
					s *= 1 - math.Abs(wa-wb)/big
				}
			}
			score[r][p] = s
		}
	}
	total := bestMatching(score, ra, rb)
	return total / float64(max(ra, rb)), nil
}

// colNorms returns the column 2-norms of every matrix.
func colNorms(ms []*kernels.Matrix) [][]float64 {
	out := make([][]float64, len(ms))
	for m, a := range ms {
		out[m] = make([]float64, a.Cols)
		for i := range a.Rows {
			for j, v := range a.Row(i) {
				out[m][j] += float64(v) * float64(v)
			}
		}
		for j := range out[m] {
			out[m][j] = math.Sqrt(out[m][j])
		}
	}
	return out
}

// bestMatching returns the largest sum of score[r][p] over one-to-one
// pairings of rows and columns: exhaustive over pairings when both
// sides are at most 8, greedy (best remaining pair first) above.
func bestMatching(score [][]float64, ra, rb int) float64 {
	if max(ra, rb) <= 8 {
		usedB := make([]bool, rb)
		var rec func(r int) float64
		rec = func(r int) float64 {
			if r == ra {
				return 0
			}
			best := rec(r + 1) // row r unmatched (only useful when ra > rb)
			for p := range rb {
				if usedB[p] {
					continue
				}
				usedB[p] = true
				best = max(best, score[r][p]+rec(r+1))
				usedB[p] = false
			}
			return best
		}
		return rec(0)
	}
	usedA, usedB := make([]bool, ra), make([]bool, rb)
	var total float64
	for range min(ra, rb) {
		br, bp, bs := -1, -1, -1.0
		for r := range ra {
			if usedA[r] {
				continue
			}
			for p := range rb {
				if !usedB[p] && score[r][p] > bs {
					br, bp, bs = r, p, score[r][p]
				}
			}
		}
		usedA[br], usedB[bp] = true, true
		total += bs
	}
	return total
}
