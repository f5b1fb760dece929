package model

import (
	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/warm"
)

// Warm runs what a decision of op on an order-n tensor for dev runs, once
// for every mode, on a small tensor of its own, and throws the answers
// away: the summary's counts, the global features, the head's trees and
// the graph's encoding, and the network where the model's graph is
// already read. Before the features, it writes the decisions' scratch
// ahead where no reader left any (warm.Fill). It reads nothing of any user's tensor and changes no
// prediction; it leaves the process, and the core it ran on, ready for
// the first real decision. Why: in a one-shot command the first decision
// of each core ran the code, the stack and the allocator's caches from
// cold, and on the 2-core VMs measured the second core's first mode of
// `predict --mode all` took twice as long as the same work done warm
// (docs/model.md, "Warm before the first decision"). A command calls it
// where a core would otherwise wait while the model loads: predict runs
// it on its helper, or on a goroutine of its own for one mode.
//
// Warm never waits for the model's load: the network is run only if its
// graph was read before Warm got to it. It asks stop, when not nil,
// between steps, and returns when it reports true: the decisions it
// readies for have begun, and would share the core's memory with it.
// Errors (a device the model has no head for, an order the op does not
// take) end it quietly; the decision that meets them reports them. It is
// safe for concurrent use.
func (p GCNPredictor) Warm(op hetero.Op, n int, dev hetero.Info, stop func() bool) {
	if stop == nil {
		stop = func() bool { return false }
	}
	if p.Model == nil || op.String() != p.Model.Info.Op {
		return
	}
	s := warmSummary(n)
	if s == nil || stop() {
		return
	}
	p.Class, p.DeviceModel, p.DeviceFamily = dev.Class(), dev.Model, dev.Family
	info := &p.Model.Info
	head, _, err := p.headFor(dev.Kind)
	if err != nil || p.byRule(head) {
		return
	}
	// The decisions' scratch, written ahead where no reader left any
	// (warm.Fill): their summary's sample and counts, the graphs, the
	// network's values. Only for a head that reads the tensor (the rule
	// needs none of it), and after this warm-up's own summary, which
	// would otherwise take from it.
	warm.Fill(decisionScratch, stop)
	t, err := info.scorer(info.Heads[head].Name)
	if err != nil {
		return
	}
	network := p.asksNetwork(head, t)
	for mode := range n {
		v, err := s.Global(op, mode)
		if err != nil || stop() {
			return
		}
		if t != nil && !p.Network {
			t.Probs(v[:])
		}
		if !network {
			continue
		}
		g, _, err := summaryGraph(s, op, mode, info.Budget)
		if err != nil || stop() {
			return
		}
		if p.Model.graphRead.Load() {
			if _, err := p.Model.RunHead(NewInput(g, v), head); err != nil {
				return
			}
		}
	}
}

// decisionScratch is how much written memory Warm makes sure the pool
// holds for the decisions: about twice what predict --mode all took from
// it after the read, this warm-up included, on the largest tensor
// measured (260 KiB; bench_banded4_cage10, 7.5 M nonzeros of order 4).
// Where nothing else fills the pool, writing it ahead costs 128 page
// faults on the core that waits for the model's load.
const decisionScratch = 512 << 10

// warmNNZ is the size of Warm's tensor: few enough nonzeros that making
// and summarising it costs tens of microseconds.
const warmNNZ = 1024

// warmSummary returns the summary of Warm's tensor of order n: a fixed
// pseudo-random tensor whose mode m has 8·4^m indices (at most 4,096),
// so that its slices and fibers hold from a few nonzeros to more than a
// hundred, both sides of the estimator's tally on the stack (32). It is
// made anew for each call, so that each runs the summary's counts, and
// is nil for an order the formats refuse.
func warmSummary(n int) *features.Summary {
	if n < formats.MinOrder || n > formats.MaxOrder {
		return nil
	}
	dims := make([]int, n)
	for m := range dims {
		dims[m] = min(8<<(2*m), 4096)
	}
	x, err := formats.NewCOO(dims, warmNNZ)
	if err != nil {
		return nil
	}
	idx := make([]uint32, n)
	state := uint64(0x9e3779b97f4a7c15)
	for range warmNNZ {
		for m := range idx {
			// xorshift64: any fixed sequence serves.
			state ^= state << 13
			state ^= state >> 7
			state ^= state << 17
			idx[m] = uint32(state % uint64(dims[m]))
		}
		x.Append(idx, 1)
	}
	s, err := features.Summarize(x)
	if err != nil {
		return nil
	}
	return s
}
