package formats

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"
)

// SortBy sorts the nonzeros of t lexicographically by the indices of the
// given modes (0-based, most significant first). The sort is stable, so modes
// not listed keep their previous relative order.
//
// It is a parallel least-significant-digit radix sort (COO.sortedArrays):
// where every mode's index fits one 64-bit word, of those words with the
// values carried beside them, every array then cut out of the sorted
// words; otherwise of a permutation keyed by the modes' indices packed
// into one or two words, followed by a parallel gather of every array.
// Digits on which all keys agree are skipped, so a key of b bits costs at
// most ceil(b/11) passes, and a tensor already in order costs one linear
// check. BenchmarkSort compares it with a comparison sort.
func (t *COO) SortBy(modes ...int) error {
	if err := t.checkArrays(); err != nil {
		return err
	}
	if err := checkModes(modes, t.Order(), false); err != nil {
		return err
	}
	if inds, vals := t.sorted(modes); inds != nil {
		copy(t.Inds, inds)
		t.Vals = vals
	}
	return nil
}

// sorted returns t's index arrays, mode by mode, and its values, sorted
// stably by modes, or nil where t is in that order already.
func (t *COO) sorted(modes []int) ([][]uint32, []float32) {
	lead := t.sortLead(modes)
	if lead == 0 || t.NNZ() < 2 {
		return nil, nil
	}
	// The modes not listed follow, in increasing order, below the sort
	// key: only modes[:lead] are sorted by, and ties keep their order.
	all := slices.Clone(modes)
	for m := range t.Order() {
		if !slices.Contains(all, m) {
			all = append(all, m)
		}
	}
	byOrder, vals := t.sortedArrays(all, lead, false)
	inds := make([][]uint32, t.Order())
	for j, m := range all {
		inds[m] = byOrder[j]
	}
	return inds, vals
}

// Sort sorts t by modes 0, 1, ..., N-1.
func (t *COO) Sort() {
	modes := make([]int, t.Order())
	for m := range modes {
		modes[m] = m
	}
	t.SortBy(modes...)
}

// IsSortedBy reports whether t is sorted lexicographically by modes.
func (t *COO) IsSortedBy(modes ...int) bool {
	for k := 1; k < t.NNZ(); k++ {
		for _, m := range modes {
			a, b := t.Inds[m][k-1], t.Inds[m][k]
			if a < b {
				break
			}
			if a > b {
				return false
			}
		}
	}
	return true
}

// sortPerm returns the stable permutation that sorts t by modes.
//
// A tensor already sorted by modes 0, 1, ..., N-1, as most files are, is
// within each group of equal indices of some modes sorted by the others in
// increasing order. So where the modes after modes[:k] are the first of
// those others in that order, a stable sort by modes[:k] alone gives the
// same permutation as a sort by all of modes: for the rooted orders of
// CSF and of a rooted COO (the root, then the other modes in order) that
// is one mode's key instead of all of them, and none at all for mode 0.
// The check is one linear pass, which an unsorted tensor leaves at its
// first inversion.
func (t *COO) sortPerm(modes []int) []uint32 {
	if perm := t.sortOrder(modes); perm != nil {
		return perm
	}
	return identityPerm(t.NNZ())
}

// sortOrder is sortPerm, but returns nil where t is already in that order.
func (t *COO) sortOrder(modes []int) []uint32 {
	return t.sortStable(modes[:t.sortLead(modes)])
}

// sortStable returns the permutation of a stable sort of t by modes, nil
// where there is nothing to sort.
//
// Where the key and a nonzero's position fit one 64-bit word together,
// the words are sorted on the key's bits and the permutation cut out of
// them: a pass of the radix sort then moves 8 bytes a nonzero, not a key
// and a position apart (12).
func (t *COO) sortStable(modes []int) []uint32 {
	n := t.NNZ()
	if len(modes) == 0 || n < 2 {
		return nil
	}
	total := 0
	for _, m := range modes {
		total += ModeBits(t.Dims[m])
	}
	if at := bits.Len(uint(n - 1)); total+at <= 64 {
		words := make([]uint64, n)
		t.packPositions(words, modes, at)
		radixSortFrom(words, nil, make([]uint64, n), nil, at, at+total)
		return positions(words, at)
	}
	perm := identityPerm(n)
	// Split the modes into a high and a low group of at most 64 bits each;
	// sort by the low key first, then stably by the high key.
	split := 0 // modes[:split] form the high word
	if total > 64 {
		low := 0
		split = len(modes)
		for split > 0 && low+ModeBits(t.Dims[modes[split-1]]) <= 64 {
			split--
			low += ModeBits(t.Dims[modes[split]])
		}
	}
	keys := make([]uint64, n)
	scratch := make([]uint64, n)
	pscratch := make([]uint32, n)
	if split < len(modes) {
		width := t.packKeys(keys, perm, modes[split:])
		radixSort(keys, perm, scratch, pscratch, width)
	}
	if split > 0 {
		width := t.packKeys(keys, perm, modes[:split])
		radixSort(keys, perm, scratch, pscratch, width)
	}
	return perm
}

// sortedArrays returns copies of t's index arrays, in the order of modes
// (every mode of t once), and of its values, sorted stably by
// modes[:lead]. With lead from sortLead, that is the sort by all of
// modes.
//
// Where every index fits one 64-bit word, the words are sorted with the
// values' bits carried along and every array is cut out of them: a pass
// moves 12 bytes a nonzero, and nothing is read through a permutation,
// a random read per array and nonzero. Otherwise each array is gathered
// through the sort's permutation, in its own parallel loop (independent
// loads the core overlaps); so too where the caller knows that the sort
// moves each nonzero only a short way (near), and a gather reads nearby
// memory.
func (t *COO) sortedArrays(modes []int, lead int, near bool) ([][]uint32, []float32) {
	n := t.NNZ()
	w := workers(n, 1<<15)
	inds := make([][]uint32, len(modes))
	for j := range inds {
		inds[j] = make([]uint32, n)
	}
	vals := make([]float32, n)
	total := 0
	for _, m := range modes {
		total += ModeBits(t.Dims[m])
	}
	if total > 64 || lead == 0 || near {
		perm := t.sortStable(modes[:lead])
		for j, m := range modes {
			src, dst := t.Inds[m], inds[j]
			parallelChunks(n, w, func(_, lo, hi int) {
				if perm == nil {
					copy(dst[lo:hi], src[lo:hi])
					return
				}
				for k := lo; k < hi; k++ {
					dst[k] = src[perm[k]]
				}
			})
		}
		parallelChunks(n, w, func(_, lo, hi int) {
			if perm == nil {
				copy(vals[lo:hi], t.Vals[lo:hi])
				return
			}
			for k := lo; k < hi; k++ {
				vals[k] = t.Vals[perm[k]]
			}
		})
		return inds, vals
	}
	words := make([]uint64, n)
	bits := make([]uint32, n)
	parallelChunks(n, w, func(_, lo, hi int) {
		t.pack(words, lo, hi, modes)
		for k := lo; k < hi; k++ {
			bits[k] = math.Float32bits(t.Vals[k])
		}
	})
	// Only the lead modes' bits, the top of the word, need sorting.
	from := total
	for _, m := range modes[:lead] {
		from -= ModeBits(t.Dims[m])
	}
	radixSortFrom(words, bits, make([]uint64, n), make([]uint32, n), from, total)
	shift := total
	for j, m := range modes {
		width := ModeBits(t.Dims[m])
		shift -= width
		mask := uint64(1)<<width - 1
		out := inds[j]
		parallelChunks(n, w, func(_, lo, hi int) {
			for k := lo; k < hi; k++ {
				out[k] = uint32(words[k] >> shift & mask)
			}
		})
	}
	parallelChunks(n, w, func(_, lo, hi int) {
		for k := lo; k < hi; k++ {
			vals[k] = math.Float32frombits(bits[k])
		}
	})
	return inds, vals
}

// sortedCopy returns a copy of t sorted stably by modes: SortBy of a
// clone, without copying the arrays the sort replaces.
func (t *COO) sortedCopy(modes []int) *COO {
	inds, vals := t.sorted(modes)
	if inds == nil {
		return t.Clone()
	}
	return &COO{Dims: slices.Clone(t.Dims), Inds: inds, Vals: vals}
}

// identityPerm returns 0, 1, ..., n-1.
func identityPerm(n int) []uint32 {
	perm := make([]uint32, n)
	parallelChunks(n, workers(n, 1<<16), func(_, lo, hi int) {
		for k := lo; k < hi; k++ {
			perm[k] = uint32(k)
		}
	})
	return perm
}

// packPositions sets words[k] to the indices of modes of nonzero k, packed
// with the first mode most significant, above k itself in the low at bits.
func (t *COO) packPositions(words []uint64, modes []int, at int) {
	n := len(words)
	parallelChunks(n, workers(n, 1<<15), func(_, lo, hi int) {
		t.pack(words, lo, hi, modes)
		for k := lo; k < hi; k++ {
			words[k] = words[k]<<at | uint64(k)
		}
	})
}

// pack sets words[k], for k from lo to hi-1, to the indices of modes of
// nonzero k, packed with the first mode most significant.
func (t *COO) pack(words []uint64, lo, hi int, modes []int) {
	clear(words[lo:hi])
	for _, m := range modes {
		shift, ind := ModeBits(t.Dims[m]), t.Inds[m]
		for k := lo; k < hi; k++ {
			words[k] = words[k]<<shift | uint64(ind[k])
		}
	}
}

// positions returns the low at bits of every word: the permutation of
// words sorted after packPositions.
func positions(words []uint64, at int) []uint32 {
	n := len(words)
	perm := make([]uint32, n)
	mask := uint64(1)<<at - 1
	parallelChunks(n, workers(n, 1<<16), func(_, lo, hi int) {
		for k := lo; k < hi; k++ {
			perm[k] = uint32(words[k] & mask)
		}
	})
	return perm
}

// sortedLead returns the least k such that, in a tensor of the given
// order sorted by modes 0..order-1, sorting stably by modes[:k] sorts it
// by modes: the modes other than modes[:k], in increasing order, begin
// with modes[k:].
func sortedLead(modes []int, order int) int {
	for k := range len(modes) + 1 {
		rest := make([]int, 0, order)
		for m := range order {
			if !slices.Contains(modes[:k], m) {
				rest = append(rest, m)
			}
		}
		if len(rest) >= len(modes)-k && slices.Equal(rest[:len(modes)-k], modes[k:]) {
			return k
		}
	}
	return len(modes)
}

// sortLead returns how many leading modes of modes t must be sorted by
// for a stable sort by all of them: sortedLead's when t is sorted by modes
// 0..N-1, else all of them.
func (t *COO) sortLead(modes []int) int {
	if k := sortedLead(modes, t.Order()); k < len(modes) && t.naturallySorted() {
		return k
	}
	return len(modes)
}

// naturallySorted reports whether t is sorted by modes 0, 1, ..., N-1 (ties
// allowed), in one parallel pass that stops at an inversion.
func (t *COO) naturallySorted() bool {
	n := t.NNZ()
	w := workers(n, 1<<16)
	unsorted := make([]bool, w)
	var stop atomic.Bool
	parallelChunks(n, w, func(c, lo, hi int) {
		if _, unsorted[c] = t.scanOrder(lo, hi, &stop); unsorted[c] {
			stop.Store(true)
		}
	})
	return !slices.Contains(unsorted, true)
}

// scanBlock is how many nonzeros scanOrder compares between two looks at
// its stop flag.
const scanBlock = 1 << 12

// scanOrder compares each nonzero of [lo, hi) with the one before it (from
// max(lo, 1) on) by modes 0..N-1: it returns how many equal it, and
// whether one is smaller (t is not sorted), where it stops, as it does
// between blocks once stop (when not nil) is set.
//
// Where a coordinate of order 2 to 4 fits one word, neighbours compare as
// packed words (scanPacked): comparing mode by mode branches where
// neighbours part, at a mode a predictor cannot learn, which cost 2-5 ns
// per nonzero on banded tensors (7.5 M nonzeros: 21 ms against 6.4).
func (t *COO) scanOrder(lo, hi int, stop *atomic.Bool) (dups int, unsorted bool) {
	start := max(lo, 1)
	if start >= hi {
		return 0, false
	}
	width, shifts := 0, make([]uint, len(t.Dims))
	for m, d := range t.Dims {
		shifts[m] = uint(ModeBits(d))
		width += ModeBits(d)
	}
	packed := width <= 64 && t.Order() <= 4
	for b := start; b < hi; b += scanBlock {
		if stop != nil && stop.Load() {
			return dups, false
		}
		e := min(b+scanBlock, hi)
		var d int
		if packed {
			d, unsorted = scanPacked(t.Inds, shifts, b, e)
		} else {
			d, unsorted = t.scanModes(b, e)
		}
		if dups += d; unsorted {
			return dups, true
		}
	}
	return dups, false
}

// scanPacked is scanOrder's comparison of nonzeros [lo, hi) with their
// predecessors (lo >= 1) for an order of 2 to 4 whose indices, shifted
// by shifts, fit one word. Each order's key is written out: a call or a
// loop over the modes per nonzero cost as much as the branches it saves.
func scanPacked(in [][]uint32, shifts []uint, lo, hi int) (dups int, unsorted bool) {
	switch len(in) {
	case 2:
		a, b, sa := in[0][:hi], in[1][:hi], shifts[1]
		prev := uint64(a[lo-1])<<sa | uint64(b[lo-1])
		for k := lo; k < hi; k++ {
			cur := uint64(a[k])<<sa | uint64(b[k])
			if prev > cur {
				return dups, true
			}
			if prev == cur {
				dups++
			}
			prev = cur
		}
	case 3:
		a, b, c := in[0][:hi], in[1][:hi], in[2][:hi]
		sa, sb := shifts[1]+shifts[2], shifts[2]
		prev := uint64(a[lo-1])<<sa | uint64(b[lo-1])<<sb | uint64(c[lo-1])
		for k := lo; k < hi; k++ {
			cur := uint64(a[k])<<sa | uint64(b[k])<<sb | uint64(c[k])
			if prev > cur {
				return dups, true
			}
			if prev == cur {
				dups++
			}
			prev = cur
		}
	case 4:
		a, b, c, d := in[0][:hi], in[1][:hi], in[2][:hi], in[3][:hi]
		sa, sb, sc := shifts[1]+shifts[2]+shifts[3], shifts[2]+shifts[3], shifts[3]
		prev := uint64(a[lo-1])<<sa | uint64(b[lo-1])<<sb | uint64(c[lo-1])<<sc | uint64(d[lo-1])
		for k := lo; k < hi; k++ {
			cur := uint64(a[k])<<sa | uint64(b[k])<<sb | uint64(c[k])<<sc | uint64(d[k])
			if prev > cur {
				return dups, true
			}
			if prev == cur {
				dups++
			}
			prev = cur
		}
	}
	return dups, false
}

// scanModes is scanOrder's comparison of nonzeros [lo, hi) with their
// predecessors (lo >= 1), mode by mode.
func (t *COO) scanModes(lo, hi int) (dups int, unsorted bool) {
	for k := lo; k < hi; k++ {
		same := true
		for _, ind := range t.Inds {
			if a, b := ind[k-1], ind[k]; a != b {
				if a > b {
					return dups, true
				}
				same = false
				break
			}
		}
		if same {
			dups++
		}
	}
	return dups, false
}

// packKeys sets keys[k] to the indices of modes of nonzero perm[k], packed
// with the first mode most significant, and returns the key width in bits.
func (t *COO) packKeys(keys []uint64, perm []uint32, modes []int) int {
	total := 0
	for _, m := range modes {
		total += ModeBits(t.Dims[m])
	}
	n := len(keys)
	parallelChunks(n, workers(n, 1<<15), func(_, lo, hi int) {
		clear(keys[lo:hi])
		for _, m := range modes {
			shift := ModeBits(t.Dims[m])
			ind := t.Inds[m]
			for k := lo; k < hi; k++ {
				keys[k] = keys[k]<<shift | uint64(ind[perm[k]])
			}
		}
	})
	return total
}

const radixBits = 11

// radixSort stably sorts keys (of the given bit width) and carries perm along.
// scratch and pscratch are buffers of the same length.
func radixSort(keys []uint64, perm []uint32, scratch []uint64, pscratch []uint32, bits int) {
	radixSortFrom(keys, perm, scratch, pscratch, 0, bits)
}

// radixSortFrom is radixSort by bits from to bits-1 of the keys only:
// keys whose lower bits are already in order within each group of equal
// upper bits need no passes over them (sortedLead). perm and pscratch may
// both be nil: then only the keys are sorted.
func radixSortFrom(keys []uint64, perm []uint32, scratch []uint64, pscratch []uint32, from, bits int) {
	n := len(keys)
	if n < 2 || bits <= from {
		return
	}
	passes := (bits - from + radixBits - 1) / radixBits
	if passes >= 2 && n >= msdMinKeys {
		radixSortMSD(keys, perm, scratch, pscratch, from, bits)
		return
	}
	width := (bits - from + passes - 1) / passes
	buckets := 1 << width
	mask := uint64(buckets - 1)
	w := workers(n, 1<<15)
	counts := make([][]int, w)
	for c := range counts {
		counts[c] = make([]int, buckets)
	}
	src, dst := keys, scratch
	psrc, pdst := perm, pscratch
	for p := range passes {
		shift := uint(from + p*width)
		parallelChunks(n, w, func(c, lo, hi int) {
			cnt := counts[c]
			clear(cnt)
			for _, k := range src[lo:hi] {
				cnt[(k>>shift)&mask]++
			}
		})
		// Exclusive prefix sums: bucket-major, worker-minor, so each
		// worker's chunk lands after the earlier chunks' equal keys.
		sum, skip := 0, false
		for b := range buckets {
			for c := range w {
				v := counts[c][b]
				if v == n {
					skip = true
				}
				counts[c][b] = sum
				sum += v
			}
		}
		if skip {
			continue
		}
		parallelChunks(n, w, func(c, lo, hi int) {
			off := counts[c]
			if psrc == nil {
				for _, key := range src[lo:hi] {
					b := (key >> shift) & mask
					dst[off[b]] = key
					off[b]++
				}
				return
			}
			for k := lo; k < hi; k++ {
				key := src[k]
				b := (key >> shift) & mask
				dst[off[b]] = key
				pdst[off[b]] = psrc[k]
				off[b]++
			}
		})
		src, dst = dst, src
		psrc, pdst = pdst, psrc
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
		copy(perm, psrc)
	}
}

// msdMinKeys is the fewest keys radixSortFrom sorts by their top digit
// first (radixSortMSD): from about a megabyte of keys, each pass of a
// least-significant-digit sort over all of them goes to memory, where
// the top digit's buckets are each sorted in cache. A variable so that
// tests can take the path with few keys.
var msdMinKeys = 1 << 17

// radixSortMSD is radixSortFrom in one pass over all the keys by their
// top digit (at most radixBits of bits from to bits-1), scattering them
// stably into buckets, then a least-significant-digit sort of each
// bucket by the bits below (lsdInto): a bucket of a few thousand keys
// sorts in cache, so the whole sort reads and writes memory about twice
// where a pass per digit over all the keys would, 3 to 5 times on the
// keys of a tensor of 10^6 to 10^7 nonzeros. Stable, as radixSortFrom.
func radixSortMSD(keys []uint64, perm []uint32, scratch []uint64, pscratch []uint32, from, bits int) {
	n := len(keys)
	top := min(radixBits, bits-from)
	shift := uint(bits - top)
	buckets := 1 << top
	mask := uint64(buckets - 1)
	w := workers(n, 1<<15)
	counts := make([][]int, w)
	for c := range counts {
		counts[c] = make([]int, buckets)
	}
	parallelChunks(n, w, func(c, lo, hi int) {
		cnt := counts[c]
		for _, k := range keys[lo:hi] {
			cnt[(k>>shift)&mask]++
		}
	})
	// Exclusive prefix sums, bucket-major and worker-minor as in
	// radixSortFrom, and where each bucket starts.
	starts := make([]int, buckets+1)
	sum := 0
	for b := range buckets {
		starts[b] = sum
		for c := range w {
			v := counts[c][b]
			if v == n {
				// One top digit for every key: sort by the bits below.
				radixSortFrom(keys, perm, scratch, pscratch, from, int(shift))
				return
			}
			counts[c][b] = sum
			sum += v
		}
	}
	starts[buckets] = n
	parallelChunks(n, w, func(c, lo, hi int) {
		off := counts[c]
		for k := lo; k < hi; k++ {
			key := keys[k]
			b := (key >> shift) & mask
			scratch[off[b]] = key
			if perm != nil {
				pscratch[off[b]] = perm[k]
			}
			off[b]++
		}
	})
	// Each worker takes a run of whole buckets of about n/w keys, and
	// sorts them back into keys and perm.
	first := make([]int, w+1)
	for c, b := 1, 0; c < w; c++ {
		for b < buckets && starts[b] < c*n/w {
			b++
		}
		first[c] = b
	}
	first[w] = buckets
	parallelChunks(w, w, func(c, _, _ int) {
		for b := first[c]; b < first[c+1]; b++ {
			lo, hi := starts[b], starts[b+1]
			if hi-lo == 0 {
				continue
			}
			var ps, pd []uint32
			if perm != nil {
				ps, pd = pscratch[lo:hi], perm[lo:hi]
			}
			lsdInto(scratch[lo:hi], ps, keys[lo:hi], pd, from, int(shift))
		}
	})
}

// lsdInto sorts src (and psrc with it, when not nil) stably by bits from
// to to-1 of the keys, in least-significant-digit passes between src and
// dst, and leaves the result in dst and pdst; src and psrc are scratch.
func lsdInto(src []uint64, psrc []uint32, dst []uint64, pdst []uint32, from, to int) {
	n := len(src)
	// Buckets of under a few thousand keys take 10-bit digits: 11 bits
	// (radixBits) gain nothing there, and a sort of 7 M keys of 40 bits
	// took 0.74 of a pass per digit over all of them with 10 or 11, 0.82
	// with 8.
	digit := 10
	if n >= 1<<14 {
		digit = radixBits
	}
	inDst := false // where the keys are now
	if to > from {
		passes := (to - from + digit - 1) / digit
		width := (to - from + passes - 1) / passes
		mask := uint64(1)<<width - 1
		var count [1 << radixBits]int
		for p := range passes {
			shift := uint(from + p*width)
			cnt := count[:mask+1]
			clear(cnt)
			a, pa, b, pb := src, psrc, dst, pdst
			if inDst {
				a, pa, b, pb = dst, pdst, src, psrc
			}
			for _, k := range a {
				cnt[(k>>shift)&mask]++
			}
			if cnt[(a[0]>>shift)&mask] == n {
				continue // every key has this digit
			}
			at := 0
			for d, c := range cnt {
				cnt[d] = at
				at += c
			}
			for k, key := range a {
				d := (key >> shift) & mask
				b[cnt[d]] = key
				if pa != nil {
					pb[cnt[d]] = pa[k]
				}
				cnt[d]++
			}
			inDst = !inDst
		}
	}
	if !inDst {
		copy(dst, src)
		if psrc != nil {
			copy(pdst, psrc)
		}
	}
}

// sameCoord reports whether nonzeros a and b have the same coordinate.
func (t *COO) sameCoord(a, b int) bool {
	for _, ind := range t.Inds {
		if ind[a] != ind[b] {
			return false
		}
	}
	return true
}

// Dedup sorts t by modes 0..N-1 and replaces each run of nonzeros with the
// same coordinate by one nonzero holding their sum. It returns the number of
// nonzeros removed, or an error, leaving t sorted but otherwise unchanged, if
// a sum overflows float32.
func (t *COO) Dedup() (int, error) {
	if err := t.checkArrays(); err != nil {
		return 0, err
	}
	t.Sort()
	n := t.NNZ()
	// Check every run's sum first so that an overflow leaves t intact.
	for start := 0; start < n; {
		s, k := t.Vals[start], start+1
		for ; k < n && t.sameCoord(start, k); k++ {
			s += t.Vals[k]
		}
		if math.IsInf(float64(s), 0) {
			return 0, fmt.Errorf("the %d duplicates of nonzero %d sum beyond float32", k-start, start)
		}
		start = k
	}
	out := 0
	for k := 1; k < n; k++ {
		if t.sameCoord(out, k) {
			t.Vals[out] += t.Vals[k]
			continue
		}
		out++
		for m := range t.Inds {
			t.Inds[m][out] = t.Inds[m][k]
		}
		t.Vals[out] = t.Vals[k]
	}
	if n > 0 {
		out++
	}
	for m := range t.Inds {
		t.Inds[m] = slices.Clip(t.Inds[m][:out])
	}
	t.Vals = slices.Clip(t.Vals[:out])
	return n - out, nil
}

// Duplicates returns the number of nonzeros whose coordinate repeats an
// earlier one, leaving t unchanged. A tensor sorted by modes 0..N-1 (as
// most files are) costs one parallel linear pass; any other order costs a
// sort of the coordinates packed in words (or, past 64 bits, of a
// permutation), not a gather.
func (t *COO) Duplicates() int {
	n := t.NNZ()
	w := workers(n, 1<<16)
	dups := make([]int, w)
	unsorted := make([]bool, w)
	// One pass finds both: the first mode where neighbours differ decides
	// the order, and no such mode means a duplicate.
	parallelChunks(n, w, func(c, lo, hi int) {
		dups[c], unsorted[c] = t.scanOrder(lo, hi, nil)
	})
	if slices.Contains(unsorted, true) {
		all := make([]int, t.Order())
		width := 0
		for m := range all {
			all[m] = m
			width += ModeBits(t.Dims[m])
		}
		if width > 64 {
			perm := t.sortPerm(all)
			dup := 0
			for k := 1; k < n; k++ {
				if t.sameCoord(int(perm[k-1]), int(perm[k])) {
					dup++
				}
			}
			return dup
		}
		// Every coordinate fits one word: sort the words alone and count
		// equal neighbours in sequence.
		words := make([]uint64, n)
		parallelChunks(n, w, func(_, lo, hi int) { t.pack(words, lo, hi, all) })
		radixSort(words, nil, make([]uint64, n), nil, width)
		parallelChunks(n, w, func(c, lo, hi int) {
			dup := 0
			for k := max(lo, 1); k < hi; k++ {
				if words[k] == words[k-1] {
					dup++
				}
			}
			dups[c] = dup
		})
	}
	total := 0
	for _, d := range dups {
		total += d
	}
	return total
}

// SumDuplicates is Dedup when t has duplicate coordinates, and leaves t
// (and its order) untouched when it has none. It returns the number of
// nonzeros removed.
func (t *COO) SumDuplicates() (int, error) {
	if t.Duplicates() == 0 {
		return 0, nil
	}
	return t.Dedup()
}
