package train

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/sparsetune/sparsetune/formats"
)

// builder appends the nonzeros of a stage's output: the input's modes in
// order with the new mode inserted at position at (0-based).
type builder struct {
	in  *formats.COO
	out *formats.COO
	at  int
}

// newBuilder prepares an output of the given dims for in, the new mode at
// 1-based position at, with room for about want nonzeros.
func newBuilder(in *formats.COO, dims []int, at int, want float64) *builder {
	// Ten percent over the expectation covers the sampling noise of all but
	// the smallest outputs without a second doubling of every array.
	capacity := int(min(want*1.1+64, MaxNNZ))
	out := &formats.COO{Dims: dims, Inds: make([][]uint32, len(dims)), Vals: make([]float32, 0, capacity)}
	for m := range out.Inds {
		out.Inds[m] = make([]uint32, 0, capacity)
	}
	return &builder{in: in, out: out, at: at - 1}
}

// add appends input nonzero e at new-mode index k with value v, its first
// two modes replaced by i and j.
func (b *builder) add(e int, i, j, k uint32, v float32) {
	o := b.out.Inds
	for m, ind := range b.in.Inds {
		x := ind[e]
		switch m {
		case 0:
			x = i
		case 1:
			x = j
		}
		if m >= b.at {
			m++
		}
		o[m] = append(o[m], x)
	}
	o[b.at] = append(o[b.at], k)
	b.out.Vals = append(b.out.Vals, v)
}

// apply runs the resolved stage on in.
func (st *Stage) apply(in *formats.COO, rng *rand.Rand) *formats.COO {
	p := st.Params
	b := newBuilder(in, st.outDims(in.Dims), p.At, float64(in.NNZ())*p.Grow)
	switch st.Generator {
	case GenSlices:
		applySlices(b, p, rng)
	case GenLift:
		applyLift(b, p, rng)
	case GenBand:
		applyBand(b, p, rng)
	case GenBursts:
		applyBursts(b, p, rng)
	}
	return b.out
}

// applySlices stacks p.Size slices of the input. Slice k keeps each row and
// each column with probability p.Frac (so a nonzero survives with p.Frac²),
// then relabels round(p.Shuffle·n) of the n rows (and columns) by a random
// permutation among themselves. A relabelling is a bijection, so a slice
// never holds a coordinate twice.
func applySlices(b *builder, p Params, rng *rand.Rand) {
	in := b.in
	rows, cols := in.Dims[0], in.Dims[1]
	keepRow, keepCol := make([]bool, rows), make([]bool, cols)
	rowMap, colMap := make([]uint32, rows), make([]uint32, cols)
	scratch := make([]uint32, max(rows, cols))
	ri, ci := in.Inds[0], in.Inds[1]
	for k := range p.Size {
		keep(keepRow, p.Frac, rng)
		keep(keepCol, p.Frac, rng)
		relabel(rowMap, scratch, p.Shuffle, rng)
		relabel(colMap, scratch, p.Shuffle, rng)
		for e, v := range in.Vals {
			i, j := ri[e], ci[e]
			if keepRow[i] && keepCol[j] {
				b.add(e, rowMap[i], colMap[j], uint32(k), v)
			}
		}
	}
}

// keep sets each flag with probability f.
func keep(flags []bool, f float64, rng *rand.Rand) {
	if f >= 1 {
		for i := range flags {
			flags[i] = true
		}
		return
	}
	for i := range flags {
		flags[i] = rng.Float64() < f
	}
}

// relabel makes m the identity except on round(frac·len(m)) indices chosen
// at random, which a random permutation maps among themselves.
func relabel(m, scratch []uint32, frac float64, rng *rand.Rand) {
	n := len(m)
	for i := range m {
		m[i] = uint32(i)
	}
	c := int(math.Round(frac * float64(n)))
	if c < 2 {
		return
	}
	// A partial Fisher-Yates shuffle picks the c indices, a full one on
	// them picks where they go.
	pick := scratch[:n]
	for i := range pick {
		pick[i] = uint32(i)
	}
	for x := range c {
		y := x + rng.IntN(n-x)
		pick[x], pick[y] = pick[y], pick[x]
	}
	chosen := pick[:c]
	to := slices.Clone(chosen)
	rng.Shuffle(c, func(x, y int) { to[x], to[y] = to[y], to[x] })
	for x, i := range chosen {
		m[i] = to[x]
	}
}

// sample calls f for each index in [0, n) with probability p, in increasing
// order. Below p = 1 it jumps from one kept index to the next by a geometric
// draw, so it costs the number kept, not n.
func sample(n int, p float64, rng *rand.Rand, f func(e int)) {
	if p >= 1 {
		for e := range n {
			f(e)
		}
		return
	}
	if p <= 0 {
		return
	}
	lq := math.Log1p(-p)
	for e := -1; ; {
		skip := math.Floor(math.Log1p(-rng.Float64()) / lq)
		if skip >= float64(n-e) {
			return
		}
		e += 1 + int(skip)
		if e >= n {
			return
		}
		f(e)
	}
}

// applyLift places the input in p.Support of the p.Size slices of the new
// mode. The slices' sizes follow a Zipf law: the slice of rank r (ranks are
// dealt to the slices at random) keeps each nonzero with probability
// min(1, c·r^-p.Zipf), c chosen so that the probabilities sum to p.Grow,
// and scales its value by v(k), uniform in [0.5, 1.5).
func applyLift(b *builder, p Params, rng *rand.Rand) {
	in := b.in
	var pos []int
	if p.Support == p.Size {
		pos = make([]int, p.Size)
		for k := range pos {
			pos[k] = k
		}
	} else {
		pos = rng.Perm(p.Size)[:p.Support]
		slices.Sort(pos)
	}
	rank := rng.Perm(p.Support)
	c := zipfScale(p.Grow, p.Support, p.Zipf)
	ri, ci := in.Inds[0], in.Inds[1]
	for x, k := range pos {
		keepP := min(1, c*math.Pow(float64(rank[x]+1), -p.Zipf))
		v := float32(0.5 + rng.Float64())
		sample(in.NNZ(), keepP, rng, func(e int) {
			b.add(e, ri[e], ci[e], uint32(k), in.Vals[e]*v)
		})
	}
}

// zipfScale returns c such that the sum over r = 1..s of min(1, c·r^-a)
// is g (g <= s), by bisection: the sum grows with c.
func zipfScale(g float64, s int, a float64) float64 {
	if a == 0 {
		return g / float64(s)
	}
	sum := func(c float64) float64 {
		t := 0.0
		for r := 1; r <= s; r++ {
			t += min(1, c*math.Pow(float64(r), -a))
		}
		return t
	}
	lo, hi := 0.0, math.Pow(float64(s), a)
	for range 100 {
		mid := (lo + hi) / 2
		if sum(mid) < g {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// applyBand stacks p.Size copies of the input, copy k shifted by k·p.Step
// along the diagonal of the first two modes, each keeping a nonzero with
// probability p.Frac. A shift keeps i-j, so every nonzero stays on one of
// the input's diagonals, and copy k occupies rows [k·Step, k·Step+rows).
func applyBand(b *builder, p Params, rng *rand.Rand) {
	in := b.in
	ri, ci := in.Inds[0], in.Inds[1]
	for k := range p.Size {
		off := uint32(k * p.Step)
		sample(in.NNZ(), p.Frac, rng, func(e int) {
			b.add(e, ri[e]+off, ci[e]+off, uint32(k), in.Vals[e])
		})
	}
}

// applyBursts adds a time mode of p.Size steps. p.Bursts burst centres are
// drawn uniformly in time, and get a Zipf popularity (exponent p.Zipf) in
// draw order. Each input nonzero occurs c times (c = 1 + a geometric draw,
// mean p.Grow; below a mean of 1, once with probability p.Grow), at most
// p.Size, around one to three centres it picks by popularity: each
// occurrence is a centre plus a normal offset of deviation p.Width,
// reflected into [0, Size). Its times are distinct (a taken time is redrawn,
// then the next free one is used), so nonzeros never collide.
func applyBursts(b *builder, p Params, rng *rand.Rand) {
	in := b.in
	size := p.Size
	centres := make([]int, p.Bursts)
	for x := range centres {
		centres[x] = rng.IntN(size)
	}
	var zipf *rand.Zipf
	if p.Bursts > 1 {
		zipf = rand.NewZipf(rng, p.Zipf, 1, uint64(p.Bursts-1))
	}
	pick := func() int {
		if zipf == nil {
			return centres[0]
		}
		return centres[zipf.Uint64()]
	}
	// taken[t] == e+1 marks time t as used by nonzero e: no clearing needed.
	taken := make([]uint32, size)
	lq := 0.0
	if p.Grow > 1 {
		lq = math.Log1p(-1 / p.Grow)
	}
	ri, ci := in.Inds[0], in.Inds[1]
	var own [3]int
	for e, v := range in.Vals {
		c := 1
		switch {
		case p.Grow < 1:
			if rng.Float64() >= p.Grow {
				continue
			}
		case p.Grow > 1:
			c = 1 + int(min(math.Floor(math.Log1p(-rng.Float64())/lq), float64(size)))
		}
		c = min(c, size)
		nb := min(c, 1+rng.IntN(3))
		for x := range nb {
			own[x] = pick()
		}
		stamp := uint32(e + 1)
		for range c {
			centre := own[0]
			if nb > 1 {
				centre = own[rng.IntN(nb)]
			}
			t := reflectInto(centre+int(math.Round(rng.NormFloat64()*p.Width)), size)
			for try := 0; taken[t] == stamp && try < 8; try++ {
				t = reflectInto(centre+int(math.Round(rng.NormFloat64()*p.Width)), size)
			}
			for taken[t] == stamp {
				if t++; t == size {
					t = 0
				}
			}
			taken[t] = stamp
			b.add(e, ri[e], ci[e], uint32(t), v)
		}
	}
}

// reflectInto folds t into [0, n) by reflecting it at both ends, so bursts near
// an end pile up less than clamping would make them.
func reflectInto(t, n int) int {
	t %= 2 * n
	if t < 0 {
		t += 2 * n
	}
	if t >= n {
		t = 2*n - 1 - t
	}
	return t
}
