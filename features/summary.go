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
	"github.com/sparsetune/sparsetune/internal/par"
	"github.com/sparsetune/sparsetune/internal/radix"
	"github.com/sparsetune/sparsetune/internal/warm"
)

// ExactNNZ is the most nonzeros a Summary reads in full. Beyond it, a
// summary reads a sample of SampleNNZ(nnz) nonzeros.
const ExactNNZ = 1 << 16

// Sample sizes beyond ExactNNZ: one nonzero in SampleStride, and at
// least SampleShare/nnz (a share of a smaller tensor), never fewer than
// MinSample nor more than MaxSample.
const (
	SampleStride = 2048
	SampleShare  = 1 << 30
	MinSample    = 1 << 10
	MaxSample    = 1 << 14
)

// SampleNNZ returns how many nonzeros a Summary of a tensor with nnz
// nonzeros reads: all of them up to ExactNNZ, else the larger of
// nnz/SampleStride and SampleShare/nnz, cut to [MinSample, MaxSample].
//
// Why a sample, and why this size: a prediction is worth making only if
// it costs a small part of the kernel run it tunes, and the fastest
// kernels run at about 0.35-1 ns per nonzero on the 2-core VM. Reading
// every index of every nonzero alone costs more than that, so no
// statistic may need them all. Reading, counting and encoding one sampled
// nonzero along every mode costs about 100-150 ns in a one-shot process
// (a cache miss per mode, then the counts and the graph), so one nonzero
// in 2,048 keeps a decision near a tenth of the kernel at 10^7 nonzeros,
// and the ceiling bounds the cost on huge tensors.
//
// Below that the kernel shrinks faster than the sample may: the
// estimates of sparse modes need a few percent of the nonzeros
// (TestSampledEstimates bounds them; at 10^5 nonzeros, one in 50 was too
// few to see the slices of four nonzeros each), and SampleShare/nnz
// gives 4% at 10^5. The two meet near 1.5·10^6 nonzeros (724), and the
// floor, MinSample, holds the sample at 1,024 from 2^20 to 2^21
// nonzeros, where a kernel runs in about a millisecond and the rest of a
// decision (the network alone: about 0.05 ms) does not shrink with the
// sample. The largest-slice estimate is the one that bounded the floor
// (at 2,048, before Summary.Global's estimate took the noise of equal
// slices into account). The size grows on either side: 2,048 at 2^19
// and at 2^22 nonzeros.
func SampleNNZ(nnz int) int {
	if nnz <= ExactNNZ {
		return nnz
	}
	return min(max(nnz/SampleStride, SampleShare/nnz, MinSample), MaxSample)
}

// Summary is what a prediction knows of a tensor: its dims and nonzero
// count, exactly, and the nonzeros its statistics come from. It serves
// every op and mode: Global and Encode compute one (op, mode) from it in
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
// independent, the estimates' distribution does not depend on the order.
// Statistics are then estimated (Global documents how) and documented
// bounds on their error are tested in global_test.go.
//
// The positions are read in increasing order, every mode's index in one
// loop, and checked against the dims. A mode's slices (in a bitmap of
// the dim, or in a table of their indices where the dim is large:
// sliceCounts) and its fibers (in a table of their keys) are counted when
// first needed, or for every mode at once, concurrently, by Prepare; a
// mode's indices are ranked only for a graph. A Summary is safe for
// concurrent use.
type Summary struct {
	Dims   []int
	NNZ    int
	Sample *formats.COO // the nonzeros read: the tensor itself when Exact
	Exact  bool

	// ranks[m] numbers the non-empty indices of mode m in the sample,
	// made on first use, once (rankOnce[m]), for the graphs: the graph of
	// one mode of an order-3 tensor needs two modes' ranks, not three.
	ranks    []formats.Ranks
	rankOnce []par.Once

	// slices[m] holds the sample's nonzeros per non-empty slice of mode m
	// (index of the mode), in no particular order; made on first use,
	// once (sliceOnce[m]).
	slices    [][]uint32
	sliceOnce []par.Once

	// fibers[m] holds the nonzeros per non-empty mode-m fiber
	// (combination of the other modes' indices); built on first use,
	// once (fiberOnce[m]), so that modes can be counted concurrently.
	// The Onces are par.Once: the modes decided side by side ask for
	// some of the same counts, and a goroutine that finds one being
	// made waits for microseconds, not for a parked goroutine's wake.
	fibers    [][]uint32
	fiberOnce []par.Once

	encOnce par.Once
	enc     *graphenc.Encoder
}

// Encode returns the graph of the sample for the slice shape within the
// budget, as graphenc.Encode(s.Sample, shape, b) does, through one
// graphenc.Encoder handed the ranks the summary made: each mode's nodes
// are shared between the shapes asked for, and a transposed shape's graph
// is the transpose of the one made. The graph must not be modified.
func (s *Summary) Encode(shape graphenc.Shape, b graphenc.Budget) (*graphenc.Graph, error) {
	s.encOnce.Do(func() { s.enc = graphenc.NewEncoderRanked(s.Sample, s.modeRanks) })
	return s.enc.Encode(shape, b)
}

// Summarize reads x's sample (see Summary). It checks the sample's
// indices against the dims; the rest of the tensor is trusted to be as
// formats' readers and constructors leave it.
func Summarize(x *formats.COO) (*Summary, error) { return summarize(x, SampleNNZ(x.NNZ())) }

// SummarizeExact reads every nonzero of x, whatever its size: its features
// are exact, at the cost of a pass over the whole tensor. It is the
// reference the sampled estimates are held to.
func SummarizeExact(x *formats.COO) (*Summary, error) { return summarize(x, x.NNZ()) }

// PickPositions returns the positions of the nonzeros Summarize reads in
// a tensor of nnz nonzeros, increasing, or nil when it reads them all: a
// reader picks them as it passes (formats.ReadFilePicked), and
// SummarizePicked makes the summary from its picks.
func PickPositions(nnz int) []uint64 {
	n := SampleNNZ(nnz)
	if n >= nnz {
		return nil
	}
	buf := getScratch(sampleScratch(n))
	defer putScratch(buf)
	pos := warm.Uint64s(n)
	copy(pos, samplePositions(nnz, buf[:3*n]))
	return pos
}

// sampleScratch is the keys of scratch drawing a sample of n positions
// takes: the 3n samplePositions needs, or, when more, the n +
// tableSlots(n) of the largest count the summary then makes of the sample
// (sliceCounts, countFibers), so that every later count reuses the pages
// the draw touched rather than fresh ones, each a page fault on first
// touch. The two are equal where n is a power of two (samples of 2^20 to
// 2^21 nonzeros); past 2 M nonzeros the sample is not, and its counts
// took a fresh buffer of up to 5n keys: on a VM whose page faults cost
// 13-18 µs, about a third of a decision on 2.5-7.5 M nonzeros
// (docs/model.md, "Prediction cost on a VM whose page faults are slow").
func sampleScratch(n int) int {
	if n > tableKeys {
		return 3 * n
	}
	return max(3*n, n+tableSlots(n))
}

// SummarizePicked is Summarize(x) made from p, the indices a reader picked
// at PickPositions(x.NNZ()) as it read x: the same summary, without the
// gather's cache misses into x (formats.Picks says why). When p is nil or
// was not made for x's nonzero count and sample size, it is Summarize(x).
func SummarizePicked(x *formats.COO, p *formats.Picks) (*Summary, error) {
	nnz, order := x.NNZ(), x.Order()
	n := SampleNNZ(nnz)
	if p == nil || n >= nnz || p.NNZ != nnz || len(p.Pos) != n || len(p.Inds) != order {
		return Summarize(x)
	}
	for _, ind := range p.Inds {
		if len(ind) != n {
			return Summarize(x)
		}
	}
	s, err := newSummary(x)
	if err != nil {
		return nil, err
	}
	s.Sample = &formats.COO{Dims: s.Dims, Inds: p.Inds, Vals: warm.Float32s(n)}
	if err := s.checkSample(p.Pos); err != nil {
		return nil, err
	}
	return s, nil
}

func newSummary(x *formats.COO) (*Summary, error) {
	nnz := x.NNZ()
	for m, ind := range x.Inds {
		if len(ind) != nnz {
			return nil, fmt.Errorf("tensor summary: mode %d has %d indices for %d values", m+1, len(ind), nnz)
		}
	}
	order := x.Order()
	return &Summary{Dims: slices.Clone(x.Dims), NNZ: nnz, ranks: make([]formats.Ranks, order), rankOnce: make([]par.Once, order), slices: make([][]uint32, order), sliceOnce: make([]par.Once, order), fibers: make([][]uint32, order), fiberOnce: make([]par.Once, order)}, nil
}

// checkSample checks the sample's indices against the dims; pos are the
// positions they were read at.
func (s *Summary) checkSample(pos []uint64) error {
	for m, ind := range s.Sample.Inds {
		if k := formats.IndexBeyond(ind, s.Dims[m]); k >= 0 {
			return fmt.Errorf("tensor summary: nonzero %d has an index beyond the dims", pos[k]+1)
		}
	}
	return nil
}

func summarize(x *formats.COO, n int) (*Summary, error) {
	s, err := newSummary(x)
	if err != nil {
		return nil, err
	}
	nnz, order := x.NNZ(), x.Order()
	if n == nnz {
		s.Sample, s.Exact = x, true
		for m, ind := range x.Inds {
			if k := formats.IndexBeyond(ind, s.Dims[m]); k >= 0 {
				return nil, fmt.Errorf("tensor summary: nonzero %d has an index beyond the dims", k+1)
			}
		}
		return s, nil
	}
	// The positions are a fixed pseudo-random sequence: evenly spaced ones
	// would meet a sorted tensor's slices in lockstep (a slice shorter than
	// the stride then shows at most once, and no statistic of pairs
	// survives), while independent uniform positions make the sample
	// behave as the estimators assume whatever the order. Drawn with
	// replacement: a few positions repeat (about n²/2nnz), a negligible
	// bias.
	buf := getScratch(sampleScratch(n))
	defer putScratch(buf)
	pos := samplePositions(nnz, buf[:3*n])
	s.Sample = &formats.COO{Dims: s.Dims, Inds: make([][]uint32, order), Vals: warm.Float32s(n)}
	flat := warm.Uint32s(order * n) // one allocation, of memory a reader let go of where it can
	for m := range order {
		s.Sample.Inds[m] = flat[m*n : (m+1)*n : (m+1)*n]
	}
	gather(s.Sample.Inds, x.Inds, pos)
	if err := s.checkSample(pos); err != nil {
		return nil, err
	}
	return s, nil
}

// gather sets dst[m][k] = src[m][pos[k]] for every mode m. The reads are
// cache and TLB misses, one per mode and position, and they are
// independent: reading every mode's index in one loop keeps more of them
// in flight than a loop per mode, which waits on its misses one mode at
// a time (a third less time for the order-3 gather on the 2-core VM).
func gather(dst, src [][]uint32, pos []uint64) {
	switch len(src) {
	case 3:
		a, b, c := src[0], src[1], src[2]
		da, db, dc := dst[0][:len(pos)], dst[1][:len(pos)], dst[2][:len(pos)]
		for k, at := range pos {
			da[k], db[k], dc[k] = a[at], b[at], c[at]
		}
	case 4:
		a, b, c, d := src[0], src[1], src[2], src[3]
		da, db, dc, dd := dst[0][:len(pos)], dst[1][:len(pos)], dst[2][:len(pos)], dst[3][:len(pos)]
		for k, at := range pos {
			da[k], db[k], dc[k], dd[k] = a[at], b[at], c[at], d[at]
		}
	default:
		for m, ind := range src {
			out := dst[m][:len(pos)]
			for k, at := range pos {
				out[k] = ind[at]
			}
		}
	}
}

// modeRanks returns mode m's ranks (formats.RankIndices of the sample's
// indices, checked in range when the summary was made), made on first
// use.
//
// Up to sliceBitmapSpan indices of dim per sampled nonzero its bitmap and
// prefix counts are the summaries' scratch, as for the slice counts, so
// only the ranks themselves are fresh memory.
func (s *Summary) modeRanks(m int) formats.Ranks {
	s.rankOnce[m].Do(func() {
		ind, dim := s.Sample.Inds[m], s.Dims[m]
		if inBitmapSpan(len(ind), dim) {
			set, prefix, buf := bitmapScratch(dim)
			defer putScratch(buf)
			r := formats.Ranks{Of: warm.Uint32s(len(ind)), N: bitmapPrefix(ind, set, prefix)}
			for k, i := range ind {
				r.Of[k] = bitmapRank(i, set, prefix)
			}
			s.ranks[m] = r
			return
		}
		s.ranks[m], _ = formats.RankIndices(ind, dim)
	})
	return s.ranks[m]
}

// sliceCounts returns the sample's nonzeros per non-empty slice of mode
// m, in no particular order: the estimates do not depend on it.
//
// Up to sliceBitmapSpan indices of dim per sampled nonzero they are
// counted in a bitmap of the dim with a prefix count per word
// (bitmapCounts), in the summaries' scratch: memory the sample's positions
// and the fiber counts touch anyway, so no page faults, and no branch per
// key. Past it the bitmap would outgrow that scratch, and they are counted
// in a table of the indices, as fibers are. An exact summary of more
// nonzeros than a table takes ranks the mode (formats.RankIndices).
//
// Until 2026-11-27 a mode up to 32 indices per nonzero was ranked and
// its counts read from the ranks, which the graphs use too; but a rank
// per nonzero and a bitmap in fresh memory cost a decision by the trees
// page faults it otherwise does not pay (the table was faster past 32),
// and a fresh process counted a mode of 10^5 indices in a table in 20 µs,
// against 6-10 µs for a ranked mode of 10^4. A graph now ranks the modes
// it needs itself.
func (s *Summary) sliceCounts(m int) []uint32 {
	s.sliceOnce[m].Do(func() {
		ind := s.Sample.Inds[m]
		n := len(ind)
		switch {
		case n > tableKeys:
			s.slices[m] = s.modeRanks(m).Counts()
		case inBitmapSpan(n, s.Dims[m]):
			set, prefix, buf := bitmapScratch(s.Dims[m])
			defer putScratch(buf)
			s.slices[m] = bitmapCounts(ind, set, prefix)
		default:
			buf := getScratch(n + tableSlots(n))
			defer putScratch(buf)
			keys := buf[:n]
			for j, i := range ind {
				keys[j] = uint64(i)
			}
			s.slices[m] = tableCounts(keys, buf[n:])
		}
	})
	return s.slices[m]
}

// sliceBitmapSpan is the indices of dim per sampled nonzero up to which
// sliceCounts counts a mode's slices in a bitmap: its two words per 64
// indices then fit in the 3 keys per sampled nonzero that drawing the
// sample's positions already touched (samplePositions).
const sliceBitmapSpan = 96

// inBitmapSpan reports whether a mode of dim indices, n of them sampled,
// is counted and ranked in a bitmap in the summaries' scratch.
func inBitmapSpan(n, dim int) bool { return n <= tableKeys && dim <= sliceBitmapSpan*n }

// bitmapScratch returns a bitmap of dim indices and its prefix counts,
// one word per 64 indices each, from the summaries' scratch; buf is what
// to give back (putScratch) when they are done with.
func bitmapScratch(dim int) (set, prefix, buf []uint64) {
	words := (dim + 63) / 64
	buf = getScratch(2 * words)
	return buf[:words], buf[words:], buf
}

// bitmapCounts returns the number of times each distinct index of ind
// occurs, in increasing order of index, with set and prefix (each at
// least one word per 64 indices of the largest index, overwritten) as
// scratch: the indices' bits are set, each word gets the count of set
// bits before it, and an index's slot is that count plus the set bits
// below it in its word. Every step is a sequential pass or a count without
// a branch.
func bitmapCounts(ind []uint32, set, prefix []uint64) []uint32 {
	counts := warm.Uint32s(bitmapPrefix(ind, set, prefix))
	for _, i := range ind {
		counts[bitmapRank(i, set, prefix)]++
	}
	return counts
}

// bitmapPrefix sets the bits of ind's indices in set, gives each word of
// prefix the count of set bits before it, and returns the distinct
// indices.
func bitmapPrefix(ind []uint32, set, prefix []uint64) int {
	clear(set)
	for _, i := range ind {
		set[i>>6] |= 1 << (i & 63)
	}
	n := 0
	for w, v := range set {
		prefix[w] = uint64(n)
		n += bits.OnesCount64(v)
	}
	return n
}

// bitmapRank returns the rank of index i among the indices bitmapPrefix
// set.
func bitmapRank(i uint32, set, prefix []uint64) uint32 {
	w := i >> 6
	return uint32(prefix[w]) + uint32(bits.OnesCount64(set[w]&(1<<(i&63)-1)))
}

// tableSlots returns the slots tableCounts is given for n keys: a power
// of two, at least twice n.
func tableSlots(n int) int { return 1 << bits.Len(uint(max(2*n-1, 1))) }

// samplePositions returns the n positions in [0, nnz) a sample reads (0 <
// n < nnz; buf is scratch of 3n keys, which the result is part of), in
// increasing order: the k-th drawn is a 64-bit hash of k scaled to nnz,
// so they depend on nothing but nnz and n. Reading them in increasing
// order turns the gather's random accesses into a forward sweep that
// touches each page of the index arrays once, not once per position on
// it.
//
// The positions are uniform, so they are sorted by counting them into n
// buckets of equal width and finishing with an insertion pass, which
// finds about one position per bucket to order: two sequential passes
// and a scatter. A radix sort of their 20-odd bits took two counting
// passes over a 2,048-entry table, twice as long in a one-shot process.
func samplePositions(nnz int, buf []uint64) []uint64 {
	n := len(buf) / 3
	keys, count, out := buf[:n], buf[n:2*n], buf[2*n:3*n]
	// bucket(key) = key·n/nnz, below n and increasing with key.
	scale, _ := bits.Div64(uint64(n), 0, uint64(nnz))
	clear(count)
	for k := range keys {
		key, _ := bits.Mul64(mix(uint64(k)+0x9e3779b97f4a7c15), uint64(nnz))
		keys[k] = key
		b, _ := bits.Mul64(key, scale)
		count[b]++
	}
	at := uint64(0)
	for b, c := range count {
		count[b] = at
		at += c
	}
	for _, key := range keys {
		b, _ := bits.Mul64(key, scale)
		out[count[b]] = key
		count[b]++
	}
	for i := 1; i < len(out); i++ {
		key := out[i]
		j := i
		for ; j > 0 && out[j-1] > key; j-- {
			out[j] = out[j-1]
		}
		out[j] = key
	}
	return out
}

// scratch holds the key buffers of the summaries' sorts. Reusing them is
// not about the allocator: fresh memory costs a page fault per 4 KiB on
// first touch, and in a one-shot process (sparsetune predict) those faults
// were a third of a prediction.
var scratch sync.Pool

// spare is one more buffer, of at most spareKeys keys, kept where no
// collection empties it, as a sync.Pool is emptied by every two. A reader
// that picks a summary's sample (PickPositions) draws the positions before
// it reads the arrays, and the collections that the arrays' growth of the
// heap sets off then emptied the pool before the summary counted its
// fibers: fresh pages again, 3-6 more faults per decision. It holds at
// most 512 KiB, the most a sampled summary needs.
var spare struct {
	sync.Mutex
	buf []uint64
}

const spareKeys = 1 << 16

// getScratch returns a buffer of n keys, reused when one is free.
func getScratch(n int) []uint64 {
	spare.Lock()
	if b := spare.buf; cap(b) >= n {
		spare.buf = nil
		spare.Unlock()
		return b[:n]
	}
	spare.Unlock()
	if b, ok := scratch.Get().(*[]uint64); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return warm.Uint64s(n)
}

// putScratch makes b free for reuse.
func putScratch(b []uint64) {
	if cap(b) <= spareKeys {
		spare.Lock()
		if cap(b) > cap(spare.buf) {
			b, spare.buf = spare.buf, b
		}
		spare.Unlock()
		if b == nil {
			return
		}
	}
	scratch.Put(&b)
}

// Rate returns the fraction of the nonzeros the sample holds.
func (s *Summary) Rate() float64 {
	if s.NNZ == 0 {
		return 1
	}
	return float64(s.Sample.NNZ()) / float64(s.NNZ)
}

// hashedKeyBits is the width fiber keys are hashed down to when the other
// modes' indices need more: two of at most 16,384 fibers then share a key
// with probability below 1/2000, and the sort needs four passes, not six.
const hashedKeyBits = 40

// fiberCounts returns the sample's nonzeros per non-empty mode-m fiber.
// A fiber's key is the other modes' indices in mixed radix when the
// product of their dims fits hashedKeyBits, else a hash of them cut to
// that width.
func (s *Summary) fiberCounts(m int) []uint32 {
	s.fiberOnce[m].Do(func() { s.fibers[m] = s.countFibers(m) })
	return s.fibers[m]
}

func (s *Summary) countFibers(m int) []uint32 {
	x := s.Sample
	n := x.NNZ()
	exactKey := true
	prod := uint64(1)
	for k, d := range s.Dims {
		if k != m {
			hi, lo := bits.Mul64(prod, uint64(d))
			exactKey = exactKey && hi == 0
			prod = lo
		}
	}
	slots := 0
	if n <= tableKeys {
		slots = tableSlots(n)
	}
	buf := getScratch(n + max(slots, n))
	defer putScratch(buf)
	keys, tmp := buf[:n], buf[n:]
	clear(keys)
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
	width := 64
	if exactKey {
		width = bits.Len64(prod - 1)
	}
	if width > hashedKeyBits {
		for j, k := range keys {
			keys[j] = mix(k) >> (64 - hashedKeyBits)
		}
		width = hashedKeyBits
	}
	if slots > 0 {
		return tableCounts(keys, tmp)
	}
	return runLengths(keys, tmp, width)
}

// tableKeys is the most keys tableCounts counts: a sample's fibers, or an
// exact summary's up to ExactNNZ. Its table of 2^17 slots is 1 MiB. Past
// it, an exact summary of a large tensor sorts its keys (runLengths).
const tableKeys = ExactNNZ

// countBits is the low bits of a table slot that hold its count; the
// rest hold key+1, at most 2^hashedKeyBits.
const countBits = 64 - hashedKeyBits - 1

// tableCounts returns the number of times each distinct key occurs (keys
// below 2^hashedKeyBits, at most 2^countBits of them), in no particular
// order, counting them in table, a power of two of at least twice as many
// slots as keys. A slot packs key+1 above its count, so that a probe
// reads one word, and 0 is a free slot; linear probing from a
// multiplicative hash. For the sample's few thousand keys the table sits
// in L1 or L2 and each key is one probe or two, where a radix sort of
// their 40-bit keys made four passes over them (twice the time).
func tableCounts(keys, table []uint64) []uint32 {
	clear(table)
	mask := uint64(len(table) - 1)
	shift := 64 - uint(bits.Len64(mask))
	distinct := 0
	for _, k := range keys {
		tag := (k + 1) << countBits
		for i := (k * 0x9e3779b97f4a7c15) >> shift; ; i = (i + 1) & mask {
			sl := table[i]
			if sl == 0 {
				table[i] = tag | 1
				distinct++
				break
			}
			if sl>>countBits == k+1 {
				table[i] = sl + 1
				break
			}
		}
	}
	// The scan stores every slot's count and advances past the occupied
	// ones without a branch: about half the slots are taken, in no
	// pattern a branch predictor learns, and the branch's mispredictions
	// were a quarter of the count's time (1,024 keys drawn from 1,000
	// groups, Zipf-distributed, a different draw each call: 8.0 → 5.8
	// µs). out has one spare entry for the last store.
	out := warm.Uint32s(distinct + 1)
	n := 0
	for _, sl := range table {
		out[n] = uint32(sl & (1<<countBits - 1))
		n += int((sl | -sl) >> 63) // 1 when the slot is taken
	}
	return out[:distinct:distinct]
}

// Prepare counts the groups of every mode at once, the slices of each and
// the fibers that Global reads for ops (every op when none is named):
// what Global needs for those ops along any mode is then at hand. A
// caller that will ask for every mode (predict --mode all, a
// decomposition) calls it once, so that a large sample's work is spread
// over the cores; Global does the same work on demand, one mode at a
// time, without it. MTTKRP along every mode of an order-N tensor reads
// the fibers of two modes only (fiberMode), SpTTM those of all. From
// parallelSample sampled nonzeros on, it also ranks every mode for the
// graphs (Encode).
func (s *Summary) Prepare(ops ...hetero.Op) {
	n := len(s.fibers)
	if len(ops) == 0 {
		ops = []hetero.Op{hetero.SpTTM, hetero.MTTKRP}
	}
	fibers := make([]bool, n)
	for _, op := range ops {
		for m := range n {
			fibers[fiberMode(op, n, m)] = true
		}
	}
	ranks := s.Sample.NNZ() >= parallelSample
	spread(n, s.Sample.NNZ(), func(m int) {
		if ranks {
			// A graph's nodes: worth ranking ahead, in parallel, only
			// for a sample this large; a decision by the trees needs
			// none. The slices are then counted from the ranks.
			r := s.modeRanks(m)
			s.sliceOnce[m].Do(func() { s.slices[m] = r.Counts() })
		}
		s.sliceCounts(m)
		if fibers[m] {
			s.fiberCounts(m)
		}
	})
}

// parallelSample is the smallest sample whose per-mode work a summary
// spreads over goroutines, one per mode. Below it the work runs on the
// caller's goroutine: in a one-shot process (sparsetune predict) a new
// goroutine waits 50-100 µs for a thread to start and wake, and goroutines
// that touch fresh memory at once queue on the page faults, which cost
// more than counting a few thousand nonzeros (docs/model.md, "Prediction
// cost").
const parallelSample = 1 << 13

// spread runs f for every mode below order: concurrently, one goroutine
// per mode, for a sample of at least parallelSample nonzeros, else in
// order on this goroutine.
func spread(order, sample int, f func(m int)) {
	if sample < parallelSample || order < 2 || runtime.GOMAXPROCS(0) < 2 {
		for m := range order {
			f(m)
		}
		return
	}
	var wg sync.WaitGroup
	for m := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(m)
		}()
	}
	wg.Wait()
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
//     spread of a sampled count), over p, and at least the mean; when c
//     is no more than equal groups would show (noiseTop), the geometric
//     mean of that and the mean;
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
	fm := fiberMode(op, n, mode)
	fiberSpace := math.Inf(1)
	if logVolume-math.Log10(float64(s.Dims[fm])) < 18 {
		fiberSpace = 1
		for k, d := range s.Dims {
			if k != fm {
				fiberSpace *= float64(d)
			}
		}
	}
	slc := estimate(s.sliceCounts(mode), p, nnz, float64(s.Dims[mode]))
	fib := estimate(s.fiberCounts(fm), p, nnz, fiberSpace)
	v[LogSlices] = log10(slc.count)
	v[LogFibers] = log10(fib.count)
	slc.put(v[LogSliceNNZMean : LogSliceNNZCV+1])
	fib.put(v[LogFiberNNZMean : LogFiberNNZCV+1])
	v[EmptySlices] = 1 - slc.count/float64(s.Dims[mode])
	nonEmptyRows := slc.count
	if shape.Rows != mode {
		nonEmptyRows = estimate(s.sliceCounts(shape.Rows), p, nnz, float64(s.Dims[shape.Rows])).count
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

// fiberMode returns the mode whose fibers the fiber features of op along
// mode of an order-order tensor describe. For SpTTM it is mode itself:
// the rows of its fiber matrix. For MTTKRP it is the last mode of
// formats.RootedOrder, the one the innermost loop of its sorted COO
// walks, and its CSF's unless formats.CSFOrder moves a mode of far fewer
// fibers to the leaf. A fiber of that mode is then a leaf run of the CSF
// rooted at mode (for order 3, the fibers under one slice), so the
// features say how long the runs are over which the kernels hoist the
// upper factor rows, and how many partial products the COO flushes. The fibers of mode
// itself, which SpTTM walks, are not a loop of any MTTKRP kernel: with
// them, gradient-boosted trees on the global features alone told COO from
// CSF on PoCL for 0.80 of the training rows, and with these for 0.91
// (docs/model.md).
func fiberMode(op hetero.Op, order, mode int) int {
	if op != hetero.MTTKRP {
		return mode
	}
	rooted := formats.RootedOrder(order, mode)
	return rooted[len(rooted)-1]
}

// noiseTop returns the smallest count c that fewer than one of n
// Poisson(λ) draws is expected to reach: n·P(X ≥ c) < 1. Past λ = 64 it
// takes the normal approximation, λ + √(2λ ln n).
func noiseTop(lambda, n float64) float64 {
	if n <= 1 || lambda <= 0 {
		return 0
	}
	if lambda > 64 {
		return math.Ceil(lambda + math.Sqrt(2*lambda*math.Log(n)))
	}
	term := math.Exp(-lambda) // P(X = c)
	tail := 1.0               // P(X ≥ c)
	c := 0.0
	for n*tail >= 1 && tail > 0 {
		tail -= term
		c++
		term *= lambda / c
	}
	return c
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
	var bigBuf [32]uint32
	h := tallyCounts(sampled, most, bigBuf[:0])
	g.total = total
	if p >= 1 {
		g.count, g.max, g.sq = d, float64(most), pairs+sampledNNZ
		g.hist = make([]bin, 0, h.distinct())
		h.each(func(c, f float64) { g.hist = append(g.hist, bin{c, f}) })
		return g
	}
	f1, f2 := h.dense[1], h.dense[2]
	chao := d + f1*(f1-1)/(2*(f2+1))
	q := 1 - p
	var num, den float64
	h.each(func(i, f float64) {
		num += math.Pow(q, i) * f
		den += i * p * math.Pow(q, i-1) * f
	})
	shlosser := d
	if den > 0 {
		shlosser += f1 * num / den
	}
	g.count = math.Sqrt(min(chao, space, total) * min(shlosser, space, total))
	g.count = min(max(g.count, d), space, total)
	mean := total / g.count
	// A sampled count c is Poisson-like with spread √c, and the largest
	// of many is mostly that spread: one √c comes off. But groups all of
	// the mean length would show counts up to about noiseTop: a largest
	// count no higher than that cannot tell groups of the mean length
	// from groups as long as the count suggests, and the estimate is the
	// geometric middle of the two. (The count alone put many short,
	// equal slices' largest up to 0.8 decades high; the mean alone put
	// bursty slices' 0.9 decades low.)
	fm := float64(most)
	g.max = min(max((fm-math.Sqrt(fm))/p, mean), total)
	if fm <= noiseTop(p*mean, g.count) {
		g.max = math.Sqrt(g.max * mean)
	}
	g.sq = max(total+pairs/(p*p), total*mean)
	// Scale the sampled counts so the histogram holds count groups and
	// total nonzeros; every length is at least 1. Rounding can merge
	// counts into one length: merge their bins.
	weight, scale := g.count/d, total*d/(g.count*sampledNNZ)
	g.hist = make([]bin, 0, h.distinct())
	h.each(func(c, f float64) {
		l := max(1, math.Round(c*scale))
		if n := len(g.hist); n > 0 && g.hist[n-1].length == l {
			g.hist[n-1].weight += f * weight
		} else {
			g.hist = append(g.hist, bin{l, f * weight})
		}
	})
	return g
}

// denseCounts is the sampled counts below which countHist tallies groups
// in an array; the groups seen more often are few (at most one per
// denseCounts sampled nonzeros), and sorted.
const denseCounts = 32

// countHist holds f_i, the groups seen i times in a sample, for estimate:
// in dense for i below denseCounts, and as the sorted counts of the
// groups seen more often in big. Until 2026-12-07 estimate tallied every
// i up to the largest count in arrays made per call, in fresh memory,
// five of them for each of a decision's two or three estimates: most of
// a decision's allocations, and in a fresh process page faults where the
// largest count was in the thousands.
type countHist struct {
	dense [denseCounts]float64
	big   []uint32
}

// tallyCounts returns the histogram of sampled, whose largest count is
// most, its big counts appended to buf.
func tallyCounts(sampled []uint32, most uint32, buf []uint32) countHist {
	var h countHist
	// Most counts are equal (1, 2, ...): one histogram would make every
	// increment wait for the previous one to the same slot, so four
	// interleaved ones are summed at the end. Counts from denseCounts on
	// all land in the last slot, and are gathered below.
	var parts [4][denseCounts + 1]uint32
	j := 0
	for ; j+4 <= len(sampled); j += 4 {
		parts[0][min(sampled[j], denseCounts)]++
		parts[1][min(sampled[j+1], denseCounts)]++
		parts[2][min(sampled[j+2], denseCounts)]++
		parts[3][min(sampled[j+3], denseCounts)]++
	}
	for ; j < len(sampled); j++ {
		parts[0][min(sampled[j], denseCounts)]++
	}
	for c := range h.dense {
		h.dense[c] = float64(parts[0][c] + parts[1][c] + parts[2][c] + parts[3][c])
	}
	h.big = buf
	if most >= denseCounts {
		for _, c := range sampled {
			if c >= denseCounts {
				h.big = append(h.big, c)
			}
		}
		slices.Sort(h.big)
	}
	return h
}

// each calls f(i, f_i) for every i with f_i > 0, in increasing i, so
// that sums over them do not depend on the order of the groups.
func (h *countHist) each(f func(i, n float64)) {
	for c, n := range h.dense {
		if n > 0 {
			f(float64(c), n)
		}
	}
	for k := 0; k < len(h.big); {
		c := h.big[k]
		n := k
		for k < len(h.big) && h.big[k] == c {
			k++
		}
		f(float64(c), float64(k-n))
	}
}

// distinct returns how many i each visits.
func (h *countHist) distinct() int {
	n := 0
	for _, f := range h.dense {
		if f > 0 {
			n++
		}
	}
	for k := range h.big {
		if k == 0 || h.big[k] != h.big[k-1] {
			n++
		}
	}
	return n
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

// runLengths sorts keys (whose values fit in width bits; tmp is scratch
// of the same length) and returns the number of times each distinct key
// occurs, in key order. A radix sort of at most 16,384 keys is a few
// sequential passes, where a hash table of the same keys spends its time
// on cache misses and on growing.
func runLengths(keys, tmp []uint64, width int) []uint32 {
	n := len(keys)
	if n == 0 {
		return nil
	}
	keys = radix.Sort(keys, tmp, width)
	distinct := 1
	for j := 1; j < n; j++ {
		if keys[j] != keys[j-1] {
			distinct++
		}
	}
	out := warm.Uint32s(distinct)[:0]
	run := uint32(1)
	for j := 1; j < n; j++ {
		if keys[j] == keys[j-1] {
			run++
			continue
		}
		out = append(out, run)
		run = 1
	}
	return append(out, run)
}
