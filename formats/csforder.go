package formats

import (
	"math"
	"math/bits"
)

// CSFOrder returns the level order of the CSF that NewTensorFormat builds
// for an MTTKRP of mode root: root first, then the other modes in
// increasing order, as RootedOrder, except that the leaf is the mode with
// the fewest fibers when RootedOrder's leaf has clearly more
// (csfLeafGain times).
//
// Why the leaf: the kernel sums a fiber's leaves with one multiply-add
// per nonzero and pays a product with an upper factor row once per fiber
// (kernels.NewCSFMTTKRP), so beyond the nonzeros its cost is the number
// of fibers above the leaves: nnz divided by their mean length. Which mode
// has the long fibers is the tensor's structure, not its mode numbering
// (docs/kernels.md, "The CSF's leaf").
//
// Fibers are counted, not sampled: their number is what matters, and a
// sample sees the length of the fiber a nonzero lies in (its second
// moment), which a few long fibers among many short ones inflate (a
// knowledge graph's mode of 4.0 nonzeros per fiber on average showed 64).
// Each candidate's count is a HyperLogLog sketch over every nonzero, all
// candidates in one pass (fiberCounts), spread over the cores: about 6 ns
// per nonzero on the 2-core VM, a fifth to a quarter of the conversion,
// against kernels up to 2.9 times faster.
func CSFOrder(t *COO, root int) []int {
	order := RootedOrder(t.Order(), root)
	if len(order) < 3 || t.NNZ() == 0 {
		return order
	}
	return leafOrder(order, fiberCounts(t, order[1:]))
}

// leafOrder is CSFOrder given RootedOrder's order and the fiber counts of
// its modes after the root (counts[i] is that of order[i+1] at the leaf).
func leafOrder(order []int, counts []float64) []int {
	root, leaf := order[0], order[len(order)-1]
	atLeaf := counts[len(counts)-1]
	best, fewest := leaf, atLeaf
	for i, m := range order[1 : len(order)-1] {
		if c := counts[i]; c < fewest {
			best, fewest = m, c
		}
	}
	if best == leaf || atLeaf < csfLeafGain*fewest {
		return order
	}
	out := []int{root}
	for _, m := range order[1:] {
		if m != best {
			out = append(out, m)
		}
	}
	return append(out, best)
}

// csfLeafGain is how many more fibers RootedOrder's leaf must have before
// CSFOrder puts another mode at the leaf: the sketch is within a few per
// cent, and on the bench tensors the choice between two modes of equal
// counts changed the kernel's time by up to 15% either way, where the
// ratios that paid were 2.2–37 (docs/kernels.md).
const csfLeafGain = 1.25

// hllBits is the sketch's register index width: 2^12 registers, a
// standard error of 1.04/√4096 = 1.6%.
const hllBits = 12

// fiberCounts estimates, for each mode of leaves, the number of its
// fibers in t: distinct tuples of the indices of every other mode. One
// pass over the nonzeros reads each index once for all the modes; chunks
// of the nonzeros fill sketches of their own, merged by maximum, so the
// counts do not depend on the number of cores.
func fiberCounts(t *COO, leaves []int) []float64 {
	n := t.NNZ()
	// Every index packed in one word where the dims allow it: a leaf's
	// key is then the word without the leaf's bits. Else each key is a
	// hash of the other indices.
	off := make([]uint, t.Order()+1)
	for m, d := range t.Dims {
		off[m+1] = off[m] + uint(bits.Len(uint(max(d-1, 1))))
	}
	packed := off[t.Order()] <= 64
	keep := make([]uint64, len(leaves))
	for j, l := range leaves {
		keep[j] = ^(((uint64(1) << (off[l+1] - off[l])) - 1) << off[l])
	}
	type sketch [1 << hllBits]uint8
	w := workers(n/(1<<16), 1)
	sketches := make([][]sketch, w)
	parallelChunks(n, w, func(c, lo, hi int) {
		regs := make([]sketch, len(leaves))
		for k := lo; k < hi; k++ {
			var word uint64
			if packed {
				for m, ind := range t.Inds {
					word |= uint64(ind[k]) << off[m]
				}
			}
			for j, l := range leaves {
				key := word & keep[j]
				if !packed {
					for m, ind := range t.Inds {
						if m != l {
							key = mix64(key ^ uint64(ind[k]))
						}
					}
				}
				h := mix64(key)
				r := uint8(bits.LeadingZeros64(h<<hllBits|1<<(hllBits-1)) + 1)
				reg := &regs[j][h>>(64-hllBits)]
				*reg = max(*reg, r)
			}
		}
		sketches[c] = regs
	})
	counts := make([]float64, len(leaves))
	for j := range leaves {
		reg := sketches[0][j]
		for _, s := range sketches[1:] {
			for i, v := range s[j] {
				reg[i] = max(reg[i], v)
			}
		}
		counts[j] = hllEstimate(reg[:])
	}
	return counts
}

// hllEstimate is the HyperLogLog estimate of the distinct keys of a
// sketch's registers, by linear counting where that is the better one
// (few keys).
func hllEstimate(reg []uint8) float64 {
	m := float64(len(reg))
	sum, zeros := 0.0, 0
	for _, v := range reg {
		sum += math.Ldexp(1, -int(v))
		if v == 0 {
			zeros++
		}
	}
	est := 0.7213 / (1 + 1.079/m) * m * m / sum
	if est <= 2.5*m && zeros > 0 {
		est = m * math.Log(m/float64(zeros))
	}
	return est
}

// mix64 is SplitMix64's finaliser: a well-mixed 64-bit hash of x.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
