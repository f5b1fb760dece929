package dist

import (
	"fmt"
	"slices"
)

// Grid returns the process grid for P ranks over a tensor with dims: p_n
// ranks along mode n, Π p_n = P. Each prime factor of P, largest first,
// goes to the mode with the most indices per layer so far (dims[n]/p_n),
// so the layers stay as long as they can and the factor rows exchanged
// per mode stay balanced.
func Grid(dims []int, P int) ([]int, error) {
	if P < 1 {
		return nil, fmt.Errorf("grid: %d ranks", P)
	}
	grid := make([]int, len(dims))
	for n := range grid {
		grid[n] = 1
	}
	for _, f := range primeFactors(P) {
		best := -1
		for n, d := range dims {
			if grid[n]*f > d {
				continue // a layer would be empty
			}
			if best < 0 || d*grid[best] > dims[best]*grid[n] {
				best = n
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("grid: %d ranks cannot split a tensor of dims %v into non-empty layers", P, dims)
		}
		grid[best] *= f
	}
	return grid, nil
}

// primeFactors returns p's prime factors, largest first, with repeats.
func primeFactors(p int) []int {
	var fs []int
	for f := 2; f*f <= p; f++ {
		for p%f == 0 {
			fs = append(fs, f)
			p /= f
		}
	}
	if p > 1 {
		fs = append(fs, p)
	}
	slices.Reverse(fs)
	return fs
}

// Partition is the layers of every mode: Bounds[n] holds Grid[n]+1
// increasing indices, layer c of mode n being [Bounds[n][c],
// Bounds[n][c+1]).
type Partition struct {
	Grid   []int
	Bounds [][]int
}

// NewPartition cuts each mode's indices into grid[n] contiguous layers of
// about equal nonzeros, from the nonzeros per index of each mode
// (sliceNNZ[n][i]). Every layer holds at least one index.
func NewPartition(grid []int, sliceNNZ [][]int64) (*Partition, error) {
	if len(grid) != len(sliceNNZ) {
		return nil, fmt.Errorf("partition: grid of order %d for a tensor of order %d", len(grid), len(sliceNNZ))
	}
	p := &Partition{Grid: slices.Clone(grid), Bounds: make([][]int, len(grid))}
	for n, counts := range sliceNNZ {
		parts, dim := grid[n], len(counts)
		if parts < 1 || parts > dim {
			return nil, fmt.Errorf("partition: %d layers for mode %d of dim %d", parts, n+1, dim)
		}
		var total int64
		for _, c := range counts {
			total += c
		}
		b := make([]int, parts+1)
		b[parts] = dim
		var seen int64
		i := 0
		for c := 1; c < parts; c++ {
			// Layer c starts where the running count first reaches c/parts
			// of the nonzeros, leaving room for one index per later layer.
			target := total * int64(c) / int64(parts)
			for i < dim-(parts-c) && (seen < target || i <= b[c-1]) {
				seen += counts[i]
				i++
			}
			b[c] = i
		}
		p.Bounds[n] = b
	}
	return p, nil
}

// Coords returns the grid cell of a rank: rank = Σ c_n·Π_{m>n} p_m, the
// last mode varying fastest.
func (p *Partition) Coords(rank int) []int {
	c := make([]int, len(p.Grid))
	for n := len(p.Grid) - 1; n >= 0; n-- {
		c[n] = rank % p.Grid[n]
		rank /= p.Grid[n]
	}
	return c
}

// Rank returns the rank at a grid cell.
func (p *Partition) Rank(coords []int) int {
	r := 0
	for n, c := range coords {
		r = r*p.Grid[n] + c
	}
	return r
}

// Layer returns the layer of mode n holding index i.
func (p *Partition) Layer(n int, i uint32) int {
	b := p.Bounds[n]
	lo, hi := 0, len(b)-2
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if int(i) >= b[mid] {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// Owner returns the rank owning the nonzero with the given coordinate.
func (p *Partition) Owner(coord []uint32) int {
	r := 0
	for n, i := range coord {
		r = r*p.Grid[n] + p.Layer(n, i)
	}
	return r
}
