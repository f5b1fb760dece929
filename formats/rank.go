package formats

import (
	"math/bits"

	"github.com/sparsetune/sparsetune/internal/radix"
	"github.com/sparsetune/sparsetune/internal/warm"
)

// Ranks numbers the non-empty indices of a mode in increasing order: Of[k]
// is the rank of nonzero k's index among them, and N is how many there
// are.
type Ranks struct {
	Of []uint32
	N  int
}

// Counts returns the nonzeros of each non-empty index, in rank order.
func (r Ranks) Counts() []uint32 {
	c := make([]uint32, r.N)
	for _, k := range r.Of {
		c[k]++
	}
	return c
}

// bitmapSpan is how many indices of a dim past the nonzeros one nonzero
// may pay for: up to that many, RankIndices ranks indices in a bitmap of
// the dim (an eighth of a byte per index, and a prefix count per 64); a
// sparser mode is sorted instead. The bitmap is fresh memory, faulted in
// at about 2 µs per 4 KiB in a one-shot process: at 64 indices per
// nonzero its 12 bytes per nonzero cost about what sorting them does.
const bitmapSpan = 64

// RankIndices ranks the indices of ind (see Ranks), all of which must be
// below dim; bad is the first nonzero whose index is not, or -1 (and the
// ranks are then empty).
//
// An index's rank comes from a bitmap of the dim with a prefix count per
// word: a few sequential passes, and the random reads stay in a table of
// dim/64 words. Past bitmapSpan indices per nonzero (hashed ids, the sample
// of a big tensor), (index, position) pairs are radix-sorted instead.
func RankIndices(ind []uint32, dim int) (r Ranks, bad int) {
	if k := IndexBeyond(ind, dim); k >= 0 {
		return Ranks{}, k
	}
	r.Of = warm.Uint32s(len(ind))
	if uint64(dim) > uint64(bitmapSpan)*uint64(max(len(ind), 1<<12)) {
		r.N = sortedRanks(ind, dim, r.Of)
		return r, -1
	}
	words := warm.Uint64s((dim + 63) / 64)
	for _, i := range ind {
		words[i>>6] |= 1 << (i & 63)
	}
	prefix := warm.Uint32s(len(words))
	for w, v := range words {
		prefix[w] = uint32(r.N)
		r.N += bits.OnesCount64(v)
	}
	for k, i := range ind {
		w := i >> 6
		r.Of[k] = prefix[w] + uint32(bits.OnesCount64(words[w]&(1<<(i&63)-1)))
	}
	return r, -1
}

// IndexBeyond returns the first position of ind whose index is not below
// dim, or -1. The common case, every index in range, costs one
// branch-free pass.
func IndexBeyond(ind []uint32, dim int) int {
	top := uint32(max(dim, 1) - 1)
	var over uint32
	for _, i := range ind {
		over |= max(i, top) - top
	}
	if over == 0 && dim >= 1 {
		return -1
	}
	for k, i := range ind {
		if int(i) >= dim {
			return k
		}
	}
	return -1
}

// sortedRanks is RankIndices for a mode whose dim is far larger than its
// nonzeros: it radix-sorts (index, position) keys and numbers the indices
// as they come, filling of; it returns the number of distinct indices.
func sortedRanks(ind []uint32, dim int, of []uint32) int {
	n := len(ind)
	if n == 0 {
		return 0
	}
	shift := bits.Len(uint(n - 1))
	keys := warm.Uint64s(2 * n)
	for k, i := range ind {
		keys[k] = uint64(i)<<shift | uint64(k)
	}
	sorted := radix.Sort(keys[:n], keys[n:], bits.Len(uint(dim-1))+shift)
	mask := uint64(1)<<shift - 1
	rank := -1
	prev := ^uint64(0)
	for _, key := range sorted {
		if i := key >> shift; i != prev {
			rank++
			prev = i
		}
		of[key&mask] = uint32(rank)
	}
	return rank + 1
}
