package features

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/graphenc"
	"github.com/sparsetune/sparsetune/hetero"
)

// Feature indexes a global feature in a Vector.
type Feature int

// The global features, in vector order. Counts and sizes that span orders
// of magnitude are log10 of the value (of 1+value where it can be 0);
// fractions are in [0, 1]. Ranges says what each can take.
//
// Slices are the mode's slices (one per index of the mode) and fibers the
// mode's fibers (one per combination of the other modes' indices); both
// count only non-empty ones, and per-slice and per-fiber statistics are
// over those. Rows are what the op's formats store as rows: the fibers of
// the mode for SpTTM (the rows of the fiber matrix), its slices for MTTKRP
// (the rows of the output). Empty rows refer to the mapping matrix of
// package graphenc: the fraction of its row mode's indices with no nonzero.
const (
	Order           Feature = iota // tensor order N
	LogNNZ                         // log10 nonzeros
	LogDensity                     // log10 nonzeros / product of dims
	LogMaxDim                      // log10 largest dim
	LogMinDim                      // log10 smallest dim
	LogMeanDim                     // log10 arithmetic mean of the dims
	LogModeDim                     // log10 dim of the mode
	LogSlices                      // log10 non-empty slices of the mode
	LogFibers                      // log10 non-empty fibers of the mode
	LogSliceNNZMean                // log10 mean nonzeros per slice
	LogSliceNNZStd                 // log10(1 + standard deviation of nonzeros per slice)
	LogSliceNNZMax                 // log10 most nonzeros in a slice
	LogSliceNNZCV                  // log10(1 + coefficient of variation of nonzeros per slice)
	LogFiberNNZMean                // the same four statistics per fiber
	LogFiberNNZStd
	LogFiberNNZMax
	LogFiberNNZCV
	EmptySlices    // fraction of the mode's indices with no nonzero
	EmptyRows      // fraction of the mapping matrix's rows with no nonzero
	ELLPadMean     // padding fraction of an ELL of the rows at the mean row length, rounded (at least 1); longer rows cut
	ELLPadMax      // padding fraction of an ELL of the rows at the longest row's length
	LogELLSlots    // log10 ELL slots per nonzero at the longest row's length
	HYBCOOFraction // fraction of nonzeros outside the ELL part of a HYB at formats.HYBWidthOfHistogram's width

	Count int = iota // number of features
)

// Names are the features' names, in vector order, as the CLI and model
// metadata spell them.
var Names = [Count]string{
	"order", "log_nnz", "log_density", "log_max_dim", "log_min_dim", "log_mean_dim", "log_mode_dim",
	"log_slices", "log_fibers",
	"log_slice_nnz_mean", "log_slice_nnz_std", "log_slice_nnz_max", "log_slice_nnz_cv",
	"log_fiber_nnz_mean", "log_fiber_nnz_std", "log_fiber_nnz_max", "log_fiber_nnz_cv",
	"empty_slices", "empty_rows", "ell_pad_mean", "ell_pad_max", "log_ell_slots", "hyb_coo_fraction",
}

func (f Feature) String() string {
	if f < 0 || int(f) >= Count {
		return fmt.Sprintf("Feature(%d)", int(f))
	}
	return Names[f]
}

// Ranges are the closed intervals the features lie in for any tensor
// sparsetune reads: dims below 2^32, nonzeros below 2^32, order at most
// formats.MaxOrder. Upper ends of log features follow from those limits.
var Ranges = [Count][2]float64{
	Order:           {2, formats.MaxOrder},
	LogNNZ:          {0, 32 * math.Log10(2)},
	LogDensity:      {-32 * math.Log10(2) * formats.MaxOrder, 0},
	LogMaxDim:       {0, 32 * math.Log10(2)},
	LogMinDim:       {0, 32 * math.Log10(2)},
	LogMeanDim:      {0, 32 * math.Log10(2)},
	LogModeDim:      {0, 32 * math.Log10(2)},
	LogSlices:       {0, 32 * math.Log10(2)},
	LogFibers:       {0, 32 * math.Log10(2)},
	LogSliceNNZMean: {0, 32 * math.Log10(2)},
	LogSliceNNZStd:  {0, 32 * math.Log10(2)},
	LogSliceNNZMax:  {0, 32 * math.Log10(2)},
	LogSliceNNZCV:   {0, 16 * math.Log10(2)}, // cv <= sqrt(count - 1) < 2^16
	LogFiberNNZMean: {0, 32 * math.Log10(2)},
	LogFiberNNZStd:  {0, 32 * math.Log10(2)},
	LogFiberNNZMax:  {0, 32 * math.Log10(2)},
	LogFiberNNZCV:   {0, 16 * math.Log10(2)},
	EmptySlices:     {0, 1},
	EmptyRows:       {0, 1},
	ELLPadMean:      {0, 1},
	ELLPadMax:       {0, 1},
	LogELLSlots:     {0, 32 * math.Log10(2)},
	HYBCOOFraction:  {0, 1},
}

// Vector is the global features of one tensor, op and mode.
type Vector [Count]float64

// Global returns the global features of x for op along mode (0-based).
//
// Slice statistics are exact. Fiber statistics are exact up to 2^16
// nonzeros; beyond, they are computed over the fibers whose key hashes
// into a fixed 1/S of the hash space (S a power of two keeping about 2^15
// sampled nonzeros), and the fiber count is S times the sampled one. The
// sample is a function of the tensor alone, so the result is deterministic
// and does not depend on the order of the nonzeros or on the number of
// threads. Memory is O(dims + 2^16), time one pass over the nonzeros.
func Global(x *formats.COO, op hetero.Op, mode int) (Vector, error) {
	var v Vector
	n := x.Order()
	if mode < 0 || mode >= n {
		return v, fmt.Errorf("global features: mode %d out of range for an order-%d tensor", mode+1, n)
	}
	shape, err := graphenc.ShapeFor(op, x.Dims, mode)
	if err != nil {
		return v, fmt.Errorf("global features: %w", err)
	}
	nnz := x.NNZ()
	for m, ind := range x.Inds {
		if len(ind) != nnz {
			return v, fmt.Errorf("global features: mode %d has %d indices for %d values", m+1, len(ind), nnz)
		}
	}

	scan, err := scanTensor(x, mode, shape.Rows)
	if err != nil {
		return v, err
	}

	v[Order] = float64(n)
	v[LogNNZ] = log10(float64(nnz))
	logVolume, maxDim, minDim, sumDim := 0.0, x.Dims[0], x.Dims[0], 0
	for _, d := range x.Dims {
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
	v[LogModeDim] = log10(float64(x.Dims[mode]))

	slices := newLengths(scan.sliceNNZ)
	fibers := scan.fibers
	v[LogSlices] = log10(float64(slices.count))
	v[LogFibers] = log10(float64(fibers.count) * float64(scan.sampleEvery))
	slices.put(v[LogSliceNNZMean : LogSliceNNZCV+1])
	fibers.put(v[LogFiberNNZMean : LogFiberNNZCV+1])
	v[EmptySlices] = 1 - float64(slices.count)/float64(x.Dims[mode])
	v[EmptyRows] = 1 - float64(scan.nonEmptyRows)/float64(x.Dims[shape.Rows])

	rows := fibers
	if op == hetero.MTTKRP {
		rows = slices
	}
	if rows.count > 0 {
		mean := max(1, int(math.Round(float64(rows.total)/float64(rows.count))))
		v[ELLPadMean] = rows.padding(mean)
		v[ELLPadMax] = rows.padding(rows.max)
		v[LogELLSlots] = log10(float64(rows.count) * float64(rows.max) / float64(rows.total))
		w := formats.HYBWidthOfHistogram(rows.hist)
		rest := 0
		for k := w + 1; k < len(rows.hist); k++ {
			rest += rows.hist[k] * (k - w)
		}
		v[HYBCOOFraction] = float64(rest) / float64(rows.total)
	}
	return v, nil
}

// log10 is math.Log10 with log10 of 0 (an empty tensor's counts) taken as 0.
func log10(x float64) float64 {
	if x <= 1 {
		return 0
	}
	return math.Log10(x)
}

// lengths summarises the nonzero counts of a set of non-empty slices or
// fibers, exactly in integers.
type lengths struct {
	count, total, max int
	sqHi, sqLo        uint64 // sum of squared lengths, 128 bits
	hist              []int  // hist[k] = members with k nonzeros
}

func newLengths(counts []uint32) lengths {
	var l lengths
	for _, c := range counts {
		l.add(int(c))
	}
	return l
}

// add records a member of length c; zero lengths are not members.
func (l *lengths) add(c int) {
	if c == 0 {
		return
	}
	l.count++
	l.total += c
	l.max = max(l.max, c)
	var carry uint64
	l.sqLo, carry = bits.Add64(l.sqLo, uint64(c)*uint64(c), 0)
	l.sqHi += carry
	if c >= len(l.hist) {
		l.hist = append(l.hist, make([]int, c+1-len(l.hist))...)
	}
	l.hist[c]++
}

// put writes log10 mean, log10(1+std), log10 max and log10(1+cv) to dst.
func (l *lengths) put(dst []float64) {
	if l.count == 0 {
		return
	}
	n := float64(l.count)
	mean := float64(l.total) / n
	sq := (float64(l.sqHi)*math.Exp2(64) + float64(l.sqLo)) / n
	std := math.Sqrt(max(sq-mean*mean, 0))
	dst[0] = log10(mean)
	dst[1] = math.Log10(1 + std)
	dst[2] = log10(float64(l.max))
	dst[3] = math.Log10(1 + std/mean)
}

// padding returns the fraction of an ELL of width w's slots that hold no
// nonzero, rows longer than w being cut to w.
func (l *lengths) padding(w int) float64 {
	if w == 0 {
		return 0
	}
	stored := 0
	for k, h := range l.hist {
		stored += h * min(k, w)
	}
	return 1 - float64(stored)/(float64(l.count)*float64(w))
}

// scan is what one pass over the nonzeros gathers.
type scan struct {
	sliceNNZ     []uint32 // nonzeros per index of the mode (see countPerIndex)
	nonEmptyRows int      // non-empty indices of the mapping matrix's row mode
	fibers       lengths  // sampled fibers of the mode
	sampleEvery  int      // S: one fiber in S (by key hash) is sampled
}

// exactFibers is the most nonzeros for which every fiber is counted;
// sampledNNZ the nonzeros a sample aims at beyond it.
const (
	exactFibers = 1 << 16
	sampledNNZ  = 1 << 15
)

func scanTensor(x *formats.COO, mode, rowMode int) (*scan, error) {
	nnz := x.NNZ()
	s := &scan{sampleEvery: 1}
	if nnz > exactFibers {
		s.sampleEvery = 1 << bits.Len(uint((nnz-1)/sampledNNZ))
	}
	sampleMask := uint64(s.sampleEvery - 1)

	// The fiber key is the other modes' indices in mixed radix when their
	// dims' product fits 64 bits (exact), else a 64-bit hash of them.
	others := make([]int, 0, x.Order()-1)
	for m := range x.Order() {
		if m != mode {
			others = append(others, m)
		}
	}
	exactKey := true
	radix := make([]uint64, len(others))
	prod := uint64(1)
	for i, m := range others {
		radix[i] = prod
		hi, lo := bits.Mul64(prod, uint64(x.Dims[m]))
		if hi != 0 {
			exactKey = false
		}
		prod = lo
	}

	workers := max(1, min(runtime.GOMAXPROCS(0), nnz/(1<<16)))
	parts := make([]*fiberTable, workers)
	bad := make([]int, workers) // per worker, the first nonzero with an index beyond the dims, or -1
	var wg sync.WaitGroup
	for p := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fibers := newFiberTable(min(nnz/s.sampleEvery, 2*sampledNNZ))
			parts[p], bad[p] = fibers, -1
			// Keys are built a chunk at a time, one mode after another:
			// the loops stream through each index array and need no
			// bounds checks, which per-nonzero loops over the modes did.
			var keys [1024]uint64
			lo, hi := p*nnz/workers, (p+1)*nnz/workers
			for c := lo; c < hi; c += len(keys) {
				e := min(c+len(keys), hi)
				key := keys[:e-c]
				clear(key)
				var over uint32
				for j, m := range others {
					ind, dim := x.Inds[m][c:e], uint32(x.Dims[m]-1)
					key := key[:len(ind)]
					if exactKey {
						r := radix[j]
						for k, i := range ind {
							over |= max(i, dim) - dim
							key[k] += uint64(i) * r
						}
					} else {
						for k, i := range ind {
							over |= max(i, dim) - dim
							key[k] = mix(key[k] ^ uint64(i))
						}
					}
				}
				dim := uint32(x.Dims[mode] - 1)
				for _, i := range x.Inds[mode][c:e] {
					over |= max(i, dim) - dim
				}
				if over != 0 {
					bad[p] = firstBad(x, c, e)
					return
				}
				for _, k := range key {
					if h := mix(k); h&sampleMask == 0 {
						fibers.add(k, h)
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, b := range bad {
		if b >= 0 {
			return nil, fmt.Errorf("global features: nonzero %d has an index beyond the dims", b+1)
		}
	}
	fibers := parts[0]
	for _, pt := range parts[1:] {
		fibers.merge(pt)
	}
	s.sliceNNZ = countPerIndex(x.Inds[mode], x.Dims[mode], workers)
	for _, c := range countPerIndex(x.Inds[rowMode], x.Dims[rowMode], workers) {
		if c > 0 {
			s.nonEmptyRows++
		}
	}
	for _, sl := range fibers.slots {
		s.fibers.add(int(sl.count))
	}
	return s, nil
}

// firstBad returns the first nonzero in [lo, hi) with an index beyond its
// dim.
func firstBad(x *formats.COO, lo, hi int) int {
	for k := lo; k < hi; k++ {
		for m, ind := range x.Inds {
			if int(ind[k]) >= x.Dims[m] {
				return k
			}
		}
	}
	return hi
}

// countPerIndex returns the nonzeros of each index of a mode, in any
// order, with or without the empty ones. A dim within a small multiple of
// the nonzeros gets a counter per index, split among workers; a far larger
// one (a mode of hashed ids, say) is counted by sorting a copy of the
// indices, so memory stays O(nnz) whatever the dim.
func countPerIndex(ind []uint32, dim, workers int) []uint32 {
	if dim > 8*len(ind)+1<<20 {
		sorted := slices.Clone(ind)
		slices.Sort(sorted)
		var counts []uint32
		for k := 0; k < len(sorted); {
			j := k + 1
			for j < len(sorted) && sorted[j] == sorted[k] {
				j++
			}
			counts = append(counts, uint32(j-k))
			k = j
		}
		return counts
	}
	parts := make([][]uint32, workers)
	var wg sync.WaitGroup
	for p := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := make([]uint32, dim)
			for _, i := range ind[p*len(ind)/workers : (p+1)*len(ind)/workers] {
				c[i]++
			}
			parts[p] = c
		}()
	}
	wg.Wait()
	for _, c := range parts[1:] {
		for i, n := range c {
			parts[0][i] += n
		}
	}
	return parts[0]
}

// mix is a 64-bit finaliser (the murmur3 one): every input bit affects
// every output bit, so its low bits select a fair sample of keys.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// fiberTable counts nonzeros per fiber key: open addressing with linear
// probing on the hash's high bits, doubled at half load. A slot is free
// when its count is 0.
type fiberTable struct {
	slots []fiberSlot
	used  int
	shift uint // 64 - log2(len(slots))
}

// fiberSlot keeps a key beside its count: one cache line per probe.
type fiberSlot struct {
	key   uint64
	count uint32
}

// newFiberTable returns a table sized for about n keys without growing.
func newFiberTable(n int) *fiberTable {
	lg := max(bits.Len(uint(2*n)), 6)
	return &fiberTable{slots: make([]fiberSlot, 1<<lg), shift: uint(64 - lg)}
}

func (t *fiberTable) add(key, h uint64) { t.addN(key, h, 1) }

func (t *fiberTable) addN(key, h uint64, n uint32) {
	mask := uint64(len(t.slots) - 1)
	for i := h >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		switch {
		case s.count == 0:
			s.key, s.count = key, n
			t.used++
			if 2*t.used > len(t.slots) {
				t.grow()
			}
			return
		case s.key == key:
			s.count += n
			return
		}
	}
}

func (t *fiberTable) grow() {
	old := t.slots
	t.slots, t.used, t.shift = make([]fiberSlot, 2*len(old)), 0, t.shift-1
	for _, s := range old {
		if s.count > 0 {
			t.addN(s.key, mix(s.key), s.count)
		}
	}
}

func (t *fiberTable) merge(o *fiberTable) {
	for _, s := range o.slots {
		if s.count > 0 {
			t.addN(s.key, mix(s.key), s.count)
		}
	}
}

// Describe returns the features as name-value pairs in vector order.
func (v *Vector) Describe() []NamedValue {
	out := make([]NamedValue, Count)
	for i := range Count {
		out[i] = NamedValue{Name: Names[i], Value: v[i]}
	}
	return out
}

// NamedValue is one feature with its name.
type NamedValue struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}
