package features

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/graphenc"
	"github.com/sparsetune/sparsetune/hetero"
)

// ExactNNZ is the most nonzeros a Summary reads in full. Beyond it, a
// summary reads a sample of SampleNNZ(nnz) nonzeros.
const ExactNNZ = 1 << 16

// Sample sizes beyond ExactNNZ: one nonzero in SampleStride, at least
// MinSample and at most MaxSample.
const (
	SampleStride = 256
	MinSample    = 1 << 12
	MaxSample    = 1 << 15
)

// SampleNNZ returns how many nonzeros a Summary of a tensor with nnz
// nonzeros reads: all of them up to ExactNNZ, else nnz/SampleStride cut to
// [MinSample, MaxSample].
//
// Why a sample, and why this size: a prediction is worth making only if it
// costs a small part of the kernel run it tunes, and the fastest kernels
// run at about 0.35 ns per nonzero here (2 cores). Reading every index of
// every nonzero alone costs more than that, so no statistic may need them
// all. A sample of one nonzero in 256 costs about 10 ns per sampled
// nonzero to read and count, a fifth of the kernel; the floor keeps the
// estimates usable on small tensors, where the kernel is short anyway, and
// the ceiling bounds the cost on huge ones.
func SampleNNZ(nnz int) int {
	if nnz <= ExactNNZ {
		return nnz
	}
	return min(max(nnz/SampleStride, MinSample), MaxSample)
}

// Summary is what a prediction knows of a tensor: its dims and nonzero
// count, exactly, and the nonzeros its statistics come from. It serves
// every op and mode: Global and Graph compute one (op, mode) from it in
// time proportional to the sample, and the counts per mode are shared
// between ops and kept for the next call.
//
// Up to ExactNNZ nonzeros the sample is the tensor itself and every
// statistic is exact. Beyond, it is SampleNNZ nonzeros at pseudo-random
// positions that depend only on nnz (samplePositions), so the sample is
// deterministic and does not depend on the number of threads. Which
// nonzeros it holds does depend on the order they are stored in: choosing
// them by a hash of their coordinates would mean reading all of them,
// which is what the sample avoids. Since the positions are uniform and
// independent, the estimates' distribution does not depend on the order. Statistics are then estimated
// (Global documents how) and documented bounds on their error are tested
// in summary_test.go.
type Summary struct {
	Dims   []int
	NNZ    int
	Sample *formats.COO // the nonzeros read: the tensor itself when Exact
	Exact  bool

	mu     sync.Mutex
	counts []*modeCounts // per mode, built on first use
}

// modeCounts are the sample's group sizes along one mode: nonzeros per
// non-empty slice (index of the mode) and per non-empty fiber (combination
// of the other modes' indices), in no particular order.
type modeCounts struct {
	slices, fibers []uint32
}

// Summarize reads x's sample (see Summary). It checks the sample's
// indices against the dims; the rest of the tensor is trusted to be as
// formats' readers and constructors leave it.
func Summarize(x *formats.COO) (*Summary, error) { return summarize(x, SampleNNZ(x.NNZ())) }

// SummarizeExact reads every nonzero of x, whatever its size: its features
// are exact, at the cost of a pass over the whole tensor. It is the
// reference the sampled estimates are held to.
func SummarizeExact(x *formats.COO) (*Summary, error) { return summarize(x, x.NNZ()) }

func summarize(x *formats.COO, n int) (*Summary, error) {
	nnz := x.NNZ()
	for m, ind := range x.Inds {
		if len(ind) != nnz {
			return nil, fmt.Errorf("tensor summary: mode %d has %d indices for %d values", m+1, len(ind), nnz)
		}
	}
	s := &Summary{Dims: slices.Clone(x.Dims), NNZ: nnz, counts: make([]*modeCounts, x.Order())}
	var pos []int // the sampled positions; nil when the sample is x
	if n == nnz {
		s.Sample, s.Exact = x, true
	} else {
		// The positions are a fixed pseudo-random sequence: evenly spaced
		// ones would meet a sorted tensor's slices in lockstep (a slice
		// shorter than the stride then shows at most once, and no
		// statistic of pairs survives), while independent uniform
		// positions make the sample behave as the estimators assume
		// whatever the order. Drawn with replacement: a few positions
		// repeat (about n²/2nnz), a negligible bias.
		pos = samplePositions(nnz, n)
		sample := &formats.COO{Dims: s.Dims, Inds: make([][]uint32, x.Order())}
		for m, ind := range x.Inds {
			out := make([]uint32, n)
			for k, at := range pos {
				out[k] = ind[at]
			}
			sample.Inds[m] = out
		}
		sample.Vals = make([]float32, n)
		s.Sample = sample
	}
	for m, ind := range s.Sample.Inds {
		dim := uint32(s.Dims[m] - 1)
		var over uint32
		for _, i := range ind {
			over |= max(i, dim) - dim
		}
		if over != 0 {
			for k, i := range ind {
				if i > dim {
					at := k
					if pos != nil {
						at = pos[k]
					}
					return nil, fmt.Errorf("tensor summary: nonzero %d has an index beyond the dims", at+1)
				}
			}
		}
	}
	return s, nil
}

// samplePositions returns the n positions in [0, nnz) a sample reads: the
// k-th is a 64-bit hash of k scaled to nnz, so they depend on nothing but
// nnz and n.
func samplePositions(nnz, n int) []int {
	pos := make([]int, n)
	for k := range pos {
		hi, _ := bits.Mul64(mix(uint64(k)+0x9e3779b97f4a7c15), uint64(nnz))
		pos[k] = int(hi)
	}
	return pos
}

// Rate returns the fraction of the nonzeros the sample holds.
func (s *Summary) Rate() float64 {
	if s.NNZ == 0 {
		return 1
	}
	return float64(s.Sample.NNZ()) / float64(s.NNZ)
}

// mode returns the sample's group sizes along mode m.
func (s *Summary) mode(m int) *modeCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.counts[m]; c != nil {
		return c
	}
	x := s.Sample
	n := x.NNZ()
	// Slices are counted per index (below) or in a table keyed by the
	// index, fibers in a table keyed by the other modes' indices in mixed
	// radix when the product of their dims fits 64 bits (exact), else by a
	// 64-bit hash of them.
	var sliceCounts []uint32
	if dim := s.Dims[m]; dim <= max(4*n, 1<<16) {
		// A counter per index: sequential, and small enough to stay in
		// cache, where a hash table's random probes would not.
		c := make([]uint32, dim)
		for _, i := range x.Inds[m] {
			c[i]++
		}
		for _, v := range c {
			if v > 0 {
				sliceCounts = append(sliceCounts, v)
			}
		}
	} else {
		st := newFiberTable(min(n, 1<<12))
		for _, i := range x.Inds[m] {
			st.add(uint64(i), mix(uint64(i)))
		}
		sliceCounts = st.counts()
	}
	exactKey := true
	prod := uint64(1)
	for k, d := range s.Dims {
		if k != m {
			hi, lo := bits.Mul64(prod, uint64(d))
			exactKey = exactKey && hi == 0
			prod = lo
		}
	}
	keys := make([]uint64, n)
	radix := uint64(1)
	for k, ind := range x.Inds {
		if k == m {
			continue
		}
		if exactKey {
			for j, i := range ind {
				keys[j] += uint64(i) * radix
			}
			radix *= uint64(s.Dims[k])
		} else {
			for j, i := range ind {
				keys[j] = mix(keys[j] ^ uint64(i))
			}
		}
	}
	// Sized for a few thousand fibers and grown as needed: a table sized
	// for every sampled nonzero would not fit in cache.
	ft := newFiberTable(min(n, 1<<12))
	for _, k := range keys {
		ft.add(k, mix(k))
	}
	c := &modeCounts{slices: sliceCounts, fibers: ft.counts()}
	s.counts[m] = c
	return c
}

// Global returns the global features for op along mode (0-based).
//
// From an exact summary every feature is exact. From a sample with rate p
// (S of the nnz nonzeros), the nonzeros, dims and density stay exact, and
// for the groups along a mode (slices, fibers or rows), with f_i the
// groups seen i times in the sample and d = Σ f_i:
//   - their number is the geometric mean of two classic estimators, each
//     kept within the most groups there can be: Chao's bias-corrected
//     d + f_1(f_1 − 1) / 2(f_2 + 1), which falls short where groups are
//     skewed, and Shlosser's for Bernoulli samples,
//     d + f_1·Σ q^i f_i / Σ i·p·q^(i-1) f_i (q = 1 − p), which overshoots
//     where most groups are about equal and seen once; then at least d;
//   - the mean is nnz/D; the sum of squared lengths comes from the pairs of
//     sampled nonzeros in one group, nnz + Σ c(c−1)/p², which gives the
//     standard deviation and the coefficient of variation;
//   - the longest group is the largest sampled count c, less √c (the
//     spread of a sampled count), over p, and at least the mean;
//   - the length histogram behind ELL padding at the mean width and the
//     HYB split is the sampled counts scaled to total nnz over D groups.
//
// Padding and slots at the longest row's length follow from the mean and
// the maximum in both cases.
func (s *Summary) Global(op hetero.Op, mode int) (Vector, error) {
	var v Vector
	n := len(s.Dims)
	if mode < 0 || mode >= n {
		return v, fmt.Errorf("global features: mode %d out of range for an order-%d tensor", mode+1, n)
	}
	shape, err := graphenc.ShapeFor(op, s.Dims, mode)
	if err != nil {
		return v, fmt.Errorf("global features: %w", err)
	}
	nnz := s.NNZ
	v[Order] = float64(n)
	v[LogNNZ] = log10(float64(nnz))
	logVolume, maxDim, minDim, sumDim := 0.0, s.Dims[0], s.Dims[0], 0
	for _, d := range s.Dims {
		logVolume += math.Log10(float64(d))
		maxDim, minDim, sumDim = max(maxDim, d), min(minDim, d), sumDim+d
	}
	v[LogDensity] = min(log10(float64(nnz))-logVolume, 0)
	if nnz == 0 {
		v[LogDensity] = Ranges[LogDensity][0]
	}
	v[LogMaxDim] = log10(float64(maxDim))
	v[LogMinDim] = log10(float64(minDim))
	v[LogMeanDim] = log10(float64(sumDim) / float64(n))
	v[LogModeDim] = log10(float64(s.Dims[mode]))
	if nnz == 0 {
		v[EmptySlices], v[EmptyRows] = 1, 1
		return v, nil
	}

	p := s.Rate()
	mc := s.mode(mode)
	fiberSpace := math.Inf(1)
	if logVolume-math.Log10(float64(s.Dims[mode])) < 18 {
		fiberSpace = 1
		for k, d := range s.Dims {
			if k != mode {
				fiberSpace *= float64(d)
			}
		}
	}
	slc := estimate(mc.slices, p, nnz, float64(s.Dims[mode]))
	fib := estimate(mc.fibers, p, nnz, fiberSpace)
	v[LogSlices] = log10(slc.count)
	v[LogFibers] = log10(fib.count)
	slc.put(v[LogSliceNNZMean : LogSliceNNZCV+1])
	fib.put(v[LogFiberNNZMean : LogFiberNNZCV+1])
	v[EmptySlices] = 1 - slc.count/float64(s.Dims[mode])
	nonEmptyRows := slc.count
	if shape.Rows != mode {
		nonEmptyRows = estimate(s.mode(shape.Rows).slices, p, nnz, float64(s.Dims[shape.Rows])).count
	}
	v[EmptyRows] = 1 - nonEmptyRows/float64(s.Dims[shape.Rows])

	rows := fib
	if op == hetero.MTTKRP {
		rows = slc
	}
	mean := max(1, math.Round(rows.total/rows.count))
	v[ELLPadMean] = rows.padding(mean)
	v[ELLPadMax] = 1 - rows.total/(rows.count*rows.max)
	v[LogELLSlots] = log10(rows.count * rows.max / rows.total)
	w := rows.hybWidth()
	var rest float64
	for _, b := range rows.hist {
		rest += b.weight * max(b.length-w, 0)
	}
	v[HYBCOOFraction] = rest / rows.total
	for f := range v {
		v[f] = min(max(v[f], Ranges[f][0]), Ranges[f][1])
	}
	return v, nil
}

// groupStats estimates the lengths of a set of non-empty groups (slices,
// fibers, rows) from their sampled counts.
type groupStats struct {
	count, total, max, sq float64
	hist                  []bin // estimated lengths, increasing
}

// bin is weight groups of one length.
type bin struct{ length, weight float64 }

// estimate returns the groups' statistics from their sampled counts at
// rate p, for a tensor of nnz nonzeros with at most space groups (see
// Summary.Global). At p = 1 it is exact.
func estimate(sampled []uint32, p float64, nnz int, space float64) groupStats {
	var g groupStats
	d := float64(len(sampled))
	if d == 0 {
		return g
	}
	total := float64(nnz)
	var sampledNNZ, pairs float64
	var most uint32
	for _, c := range sampled {
		fc := float64(c)
		sampledNNZ += fc
		pairs += fc * (fc - 1)
		most = max(most, c)
	}
	// freq[i] = f_i, the groups seen i times; walked in order of i, so the
	// sums below do not depend on the order of the groups.
	freq := make([]float64, most+1)
	for _, c := range sampled {
		freq[c]++
	}
	g.total = total
	if p >= 1 {
		g.count, g.max, g.sq = d, float64(most), pairs+sampledNNZ
		for c, f := range freq {
			if f > 0 {
				g.hist = append(g.hist, bin{float64(c), f})
			}
		}
		return g
	}
	f1, f2 := freq[1], 0.0
	if len(freq) > 2 {
		f2 = freq[2]
	}
	chao := d + f1*(f1-1)/(2*(f2+1))
	q := 1 - p
	var num, den float64
	for c, f := range freq {
		if f > 0 {
			i := float64(c)
			num += math.Pow(q, i) * f
			den += i * p * math.Pow(q, i-1) * f
		}
	}
	shlosser := d
	if den > 0 {
		shlosser += f1 * num / den
	}
	g.count = math.Sqrt(min(chao, space, total) * min(shlosser, space, total))
	g.count = min(max(g.count, d), space, total)
	mean := total / g.count
	// A sampled count c is Poisson-like with spread √c: the largest of
	// many small counts is mostly that spread, so one √c comes off.
	fm := float64(most)
	g.max = min(max((fm-math.Sqrt(fm))/p, mean), total)
	g.sq = max(total+pairs/(p*p), total*mean)
	// Scale the sampled counts so the histogram holds count groups and
	// total nonzeros; every length is at least 1. Rounding can merge
	// counts into one length: merge their bins.
	weight, scale := g.count/d, total*d/(g.count*sampledNNZ)
	for c, f := range freq {
		if f == 0 {
			continue
		}
		l := max(1, math.Round(float64(c)*scale))
		if n := len(g.hist); n > 0 && g.hist[n-1].length == l {
			g.hist[n-1].weight += f * weight
		} else {
			g.hist = append(g.hist, bin{l, f * weight})
		}
	}
	return g
}

// put writes log10 mean, log10(1+std), log10 max and log10(1+cv) to dst.
func (g *groupStats) put(dst []float64) {
	if g.count == 0 {
		return
	}
	mean := g.total / g.count
	std := math.Sqrt(max(g.sq/g.count-mean*mean, 0))
	dst[0] = log10(mean)
	dst[1] = math.Log10(1 + std)
	dst[2] = log10(g.max)
	dst[3] = math.Log10(1 + std/mean)
}

// padding returns the fraction of an ELL of width w's slots that hold no
// nonzero, longer groups being cut to w.
func (g *groupStats) padding(w float64) float64 {
	var stored float64
	for _, b := range g.hist {
		stored += b.weight * min(b.length, w)
	}
	return max(0, 1-stored/(g.count*w))
}

// hybWidth returns the ELL width of a HYB over the groups: the smallest
// length k with at most two thirds of the groups longer than k, as
// formats.HYBWidthOfHistogram chooses it.
func (g *groupStats) hybWidth() float64 {
	longer := g.count
	for _, b := range g.hist {
		longer -= b.weight
		if 3*longer <= 2*g.count {
			return b.length
		}
	}
	return g.hist[len(g.hist)-1].length
}
