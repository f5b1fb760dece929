package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
)

// packedTrees is an ensemble laid out for scoring, in bytes that a model
// file also carries as they are (ExportONNX), so that a process scores a
// file's trees where they lie: with no decoding, no allocation and no
// fresh memory touched. Reading a head's trees node by node allocated
// 1.7 MB of fresh pages for the embedded MTTKRP file's AVX-512 head and
// took 6-8.5 ms in a one-shot command, against a kernel of about 1 ms
// (docs/model.md, "The engine's decisions in one-shot commands").
//
// The layout, every integer little-endian:
//
//	offset 0   the magic "spt1"
//	       4   classes k (uint32)
//	       8   trees n (uint32)
//	      12   nodes m (uint32)
//	      16   depth d (uint32): the most comparisons from a root to a leaf
//	      20   zero (uint32)
//	      24   each class's starting score (k float32), then zeros to a
//	           multiple of 8 bytes
//	           each tree's first node and its class (n pairs of uint32)
//	           the nodes (m uint64)
//
// A node is one 64-bit word: its threshold (or a leaf's value) as float32
// bits in the low half, its feature (leafFeature for a leaf) in the next
// 8 bits and the index of its left child in the top 24, the right child
// next to it. Each tree's nodes are in breadth-first order, every node's
// children given the next two free places when it is reached, so a
// tree's top three levels share a cache line. Why: a decision scores a
// few hundred trees once, on features it has not seen; a node visited is
// one line here, against up to five in Trees' arrays. A leaf is its own
// left child, so that a walk of a fixed number of levels (add) stays on
// it. Walking eight trees in lockstep was slower in a fresh process
// (docs/model.md, "Boosted trees"); one tree at a time, a fixed number of
// levels and no branch on the features was faster (add).
type packedTrees struct {
	all   []byte // the layout whole, as a model file carries it
	base  []byte // k float32
	trees []byte // n (first node, class) pairs
	nodes []byte // m words
	depth int
}

const (
	packedMagic      = "spt1"
	packedHeader     = 24
	leafFeature      = 0xff
	maxPackedFeature = leafFeature // features 0 to 254
	maxPackedNodes   = 1 << 24

	// maxFixedDepth is the deepest ensemble add walks a fixed number of
	// levels; deeper ones stop at each leaf.
	maxFixedDepth = 12
	// maxPackedDepth bounds the depth a packed ensemble may declare:
	// TreeOptions allows 16.
	maxPackedDepth = 64
)

// packTrees returns t's packed layout, or nil when t has too many nodes
// or features for it, or a leaf valued NaN (then Scores walks the
// arrays).
func packTrees(t *Trees) *packedTrees {
	if len(t.Feature) >= maxPackedNodes {
		return nil
	}
	k, n, m := len(t.Classes), len(t.Roots), len(t.Feature)
	baseLen := (4*k + 7) &^ 7
	b := make([]byte, packedHeader+baseLen+8*n+8*m)
	copy(b, packedMagic)
	le := binary.LittleEndian
	le.PutUint32(b[4:], uint32(k))
	le.PutUint32(b[8:], uint32(n))
	le.PutUint32(b[12:], uint32(m))
	for c, v := range t.Base {
		le.PutUint32(b[packedHeader+4*c:], math.Float32bits(v))
	}
	trees := b[packedHeader+baseLen : packedHeader+baseLen+8*n]
	nodes := b[packedHeader+baseLen+8*n:]
	depth := 0
	next := 0 // the next free node
	var queue []int32
	var level []int
	for j, root := range t.Roots {
		le.PutUint32(trees[8*j:], uint32(next))
		le.PutUint32(trees[8*j+4:], uint32(t.RootClass[j]))
		// Breadth first: a node's children are given the next two free
		// places when it is reached, so they sit side by side.
		first := next
		queue, level = append(queue[:0], root), append(level[:0], 0)
		next++
		for q := 0; q < len(queue); q++ {
			i, at := queue[q], first+q
			if at >= m {
				return nil // a child shared by two parents: not a tree
			}
			var w uint64
			if f := t.Feature[i]; f < 0 {
				// A leaf is its own left child, compared on the
				// feature that is always -Inf: a walk of a fixed
				// number of levels stays on it once there.
				if math.IsNaN(float64(t.Value[i])) {
					return nil
				}
				w = uint64(math.Float32bits(t.Value[i])) | leafFeature<<32 | uint64(at)<<40
				depth = max(depth, level[q])
			} else if f >= maxPackedFeature {
				return nil
			} else {
				w = uint64(math.Float32bits(t.Threshold[i])) | uint64(f)<<32 | uint64(next)<<40
				next += 2
				queue, level = append(queue, t.Left[i], t.Right[i]), append(level, level[q]+1, level[q]+1)
			}
			le.PutUint64(nodes[8*at:], w)
		}
	}
	if next != m || depth > maxPackedDepth {
		return nil
	}
	le.PutUint32(b[16:], uint32(depth))
	p, err := viewPacked(b, k, maxPackedFeature, true)
	if err != nil {
		// packTrees wrote it: a failure here is this package's bug.
		panic(fmt.Sprintf("model: packTrees wrote a layout viewPacked refuses: %v", err))
	}
	return p
}

// viewPacked returns the packed ensemble in b (which it keeps, not
// copies) after checking its header and length and, whole, all of it:
// every tree a binary tree in the breadth-first order packTrees writes,
// no deeper than the depth declared, every class below k and every
// feature below nfeat, every value finite. So scoring it cannot go out of
// range, loop or read an inner node as a leaf, whatever b holds. It
// reads each byte once and allocates only the small view.
func viewPacked(b []byte, k, nfeat int, whole bool) (*packedTrees, error) {
	le := binary.LittleEndian
	if len(b) < packedHeader || string(b[:4]) != packedMagic {
		return nil, errors.New("packed trees: no header")
	}
	if int(le.Uint32(b[4:])) != k {
		return nil, fmt.Errorf("packed trees: %d classes, the head has %d", le.Uint32(b[4:]), k)
	}
	n, m, depth := uint64(le.Uint32(b[8:])), uint64(le.Uint32(b[12:])), int(le.Uint32(b[16:]))
	baseLen := uint64(4*k+7) &^ 7
	if uint64(len(b)) != packedHeader+baseLen+8*n+8*m || le.Uint32(b[20:]) != 0 {
		return nil, fmt.Errorf("packed trees: %d bytes for %d classes, %d trees and %d nodes", len(b), k, n, m)
	}
	if n == 0 || m >= maxPackedNodes || depth > maxPackedDepth {
		return nil, fmt.Errorf("packed trees: %d trees, %d nodes, depth %d", n, m, depth)
	}
	p := &packedTrees{
		all:   b,
		base:  b[packedHeader : packedHeader+4*k],
		trees: b[packedHeader+baseLen : packedHeader+baseLen+8*n],
		nodes: b[packedHeader+baseLen+8*n:],
		depth: depth,
	}
	if !whole {
		return p, nil
	}
	for c := range k {
		if v := float32At(p.base, c); math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("packed trees: class %d starts at %g", c, v)
		}
	}
	// Tree j holds the nodes from its first to the next tree's first.
	// Walking its nodes in order, level by level, each inner node's
	// children must be the next two free places and each leaf its own
	// left child: then every node but the first has exactly one parent
	// placed before it, and the walk counts each node's depth.
	for j := range n {
		first, class := uint64(le.Uint32(p.trees[8*j:])), le.Uint32(p.trees[8*j+4:])
		end := m
		if j+1 < n {
			end = uint64(le.Uint32(p.trees[8*(j+1):]))
		}
		if first >= end || (j == 0 && first != 0) || int(class) >= k {
			return nil, fmt.Errorf("packed trees: tree %d: nodes [%d, %d), class %d", j, first, end, class)
		}
		next := first + 1
		for start, stop, d := first, first+1, 0; start < stop; start, stop, d = stop, next, d+1 {
			for i := start; i < stop; i++ {
				w := le.Uint64(p.nodes[8*i:])
				v := math.Float32frombits(uint32(w))
				switch f := int(uint8(w >> 32)); {
				case f == leafFeature:
					if w>>40 != i || math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						return nil, fmt.Errorf("packed trees: tree %d: leaf %d: child %d, value %g", j, i, w>>40, v)
					}
				case f >= nfeat || d >= depth || w>>40 != next || next+2 > end || math.IsNaN(float64(v)):
					return nil, fmt.Errorf("packed trees: tree %d: node %d at depth %d of %d: feature %d, children from %d", j, i, d, depth, f, w>>40)
				default:
					next += 2
				}
			}
		}
		if next != end {
			return nil, fmt.Errorf("packed trees: tree %d reaches %d of its %d nodes", j, next-first, end-first)
		}
	}
	return p, nil
}

// touched is where touch leaves what it read, so that the reads are
// not optimised away.
var touched atomic.Uint32

// touch reads a byte of each page of the layout: the pages of a model
// embedded in the executable are mapped on first use, 50-100 µs each on
// the VMs measured, and the first scoring should not wait on them.
func (p *packedTrees) touch() {
	var sum uint32
	for i := 0; i < len(p.all); i += 4096 {
		sum += uint32(p.all[i])
	}
	touched.Add(sum)
}

// float32At returns float32 i of b.
func float32At(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

// classes returns the number of classes.
func (p *packedTrees) classes() int { return len(p.base) / 4 }

// scores sets dst[k] to the raw score of class k for the features x and
// returns dst (allocated when too short): Trees.Scores for the trees p
// was packed from.
func (p *packedTrees) scores(x []float64, dst []float64) []float64 {
	k := p.classes()
	if len(dst) < k {
		dst = make([]float64, k)
	}
	dst = dst[:k]
	for c := range dst {
		dst[c] = float64(float32At(p.base, c))
	}
	p.add(x, dst)
	return dst
}

// Probs returns the class probabilities for the features x, as
// Trees.Probs does.
func (p *packedTrees) Probs(x []float64) []float64 {
	s := p.scores(x, nil)
	softmax(s, s)
	return s
}

// right is 1 when x goes to the right child of a node of threshold thr
// (x > thr, or x NaN, as leaf decides), else 0: a set instruction, not
// a branch.
func right(x, thr float32) uint32 {
	if x <= thr {
		return 0
	}
	return 1
}

// add adds every tree's leaf value for x to its class's score. x may
// hold at most maxPackedFeature features.
//
// An ensemble no deeper than maxFixedDepth is walked depth levels down
// every tree, leaves included (each is its own left child), with the
// child chosen by arithmetic: the walk has no branch that depends on x.
// A decision walks a few hundred trees once, on features the branch
// predictor has not seen, and stopping at each leaf mispredicted about
// every other level. In a fresh process, medians of 11 on three tensors,
// the default MTTKRP head's 400 trees of depth 5: the first mode's
// scores 8-13.5 µs against 16-18 stopping at leaves, the next modes' 5.4
// against 13-14.
//
// Four trees are walked side by side, level by level: a level's child
// waits on the node it comes from, and a node on L2 takes longer to load
// than the level's arithmetic, so one tree at a time left the core
// waiting on one load; the four loads are in flight together. The same
// head's scores, warm: 8.0 µs one tree at a time, 4.7 four at a time
// (eight: 5.0). In a fresh process the gain is smaller (docs/model.md,
// "Boosted trees"): predict --mode all 3.6% faster summed over 32
// tensors, --mode 1 3% slower.
func (p *packedTrees) add(x []float64, dst []float64) {
	var x32 [maxPackedFeature + 1]float32
	for f, v := range x {
		x32[f] = float32(v)
	}
	x32[leafFeature] = float32(math.Inf(-1))
	le := binary.LittleEndian
	nodes, trees := p.nodes, p.trees
	if p.depth <= maxFixedDepth {
		// node returns the child of node i that x goes to.
		node := func(i uint32) uint32 {
			w := le.Uint64(nodes[8*uint64(i):])
			return uint32(w>>40) + right(x32[uint8(w>>32)], math.Float32frombits(uint32(w)))
		}
		leaf := func(i uint32) float64 {
			return float64(math.Float32frombits(le.Uint32(nodes[8*uint64(i):])))
		}
		for ; len(trees) >= 32; trees = trees[32:] {
			i0, i1, i2, i3 := le.Uint32(trees), le.Uint32(trees[8:]), le.Uint32(trees[16:]), le.Uint32(trees[24:])
			for range p.depth {
				i0, i1, i2, i3 = node(i0), node(i1), node(i2), node(i3)
			}
			dst[le.Uint32(trees[4:])] += leaf(i0)
			dst[le.Uint32(trees[12:])] += leaf(i1)
			dst[le.Uint32(trees[20:])] += leaf(i2)
			dst[le.Uint32(trees[28:])] += leaf(i3)
		}
		for ; len(trees) >= 8; trees = trees[8:] {
			i := le.Uint32(trees)
			for range p.depth {
				i = node(i)
			}
			dst[le.Uint32(trees[4:])] += leaf(i)
		}
		return
	}
	for ; len(trees) >= 8; trees = trees[8:] {
		w := le.Uint64(nodes[8*uint64(le.Uint32(trees)):])
		for f := uint8(w >> 32); f != leafFeature; f = uint8(w >> 32) {
			next := w >> 40
			if !(x32[f] <= math.Float32frombits(uint32(w))) { // as leaf does, NaN included
				next++
			}
			w = le.Uint64(nodes[8*next:])
		}
		dst[le.Uint32(trees[4:])] += float64(math.Float32frombits(uint32(w)))
	}
}
