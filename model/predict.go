package model

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/graphenc"
	"github.com/sparsetune/sparsetune/hetero"
)

// Ranked is a candidate format with its score: a probability for the
// learned predictors, a speed relative to the fastest (1 for it) for
// measurement, 1 or 0 for the rule.
type Ranked struct {
	Format string  `json:"format"`
	Score  float64 `json:"score"`
}

// Prediction is a predictor's answer for one tensor, op, mode and device
// kind: the formats best first, and where the time went. The GCN computes
// features and encoding side by side, so their times overlap: the wall
// time is about the longer of the two plus the inference.
type Prediction struct {
	Formats []Ranked `json:"formats"`
	// Sample is the time taken to read the tensor's sample
	// (features.Summarize). One summary can serve several predictions;
	// each then carries the whole time, and the caller splits it.
	Sample   time.Duration `json:"sample_ns"`
	Features time.Duration `json:"features_ns"`
	Encoding time.Duration `json:"encoding_ns"`
	Infer    time.Duration `json:"inference_ns"`
	// Warnings say why the prediction may be less trustworthy.
	Warnings []string `json:"warnings,omitempty"`
	// By names what decided when a predictor can answer in more than one
	// way: "rule" for a model head that defers to the hand rule
	// (Info.RuleHeads), "boosted" for one answered by its boosted trees
	// (Info.TreeHeads), "blend" for one whose trees were unsure and asked
	// the network too (Info.BlendMargins), else empty.
	By string `json:"by,omitempty"`
	// LearntRanks are the ranks at which the labels of the head that
	// answered were timed (Info.HeadLabelRanks), when the answer is
	// learnt (not the rule's). The fastest format moves with the rank:
	// RankNote says when a rank is far from them.
	LearntRanks []int `json:"learnt_ranks,omitempty"`
	// Head names the model head that answered (Info.Heads), for a
	// model's prediction: the device's class, a cpu head of its kind
	// (CPUHead), or a head learnt at another rank (RankHead).
	Head string `json:"head,omitempty"`
}

// RankNote returns a one-line note when a decision for rank R rests on
// times learnt at ranks far from it (below half the lowest or at least
// twice the highest), else "". On the 1,040 held-out MTTKRP rows timed at
// ranks 4 to 64 (docs/model.md, "The default model at other ranks"), the
// label at rank 16 was the label at 8 on 0.81 of the rows, at 4 on 0.79,
// at 32 on 0.75 and at 64 on 0.68, and the rank-16 model's oracle ratio
// fell from 0.973 to 0.949 at 32 and 0.914 at 64, where CSF, whose
// hoisting saves work per rank column, takes over; a model tuned at 64
// scored 0.922 at 16. Twice the rank is where the picks had fallen;
// below, the rank-16 model held to rank 4 (0.970), but the tuned one did
// not hold at a quarter of its rank, so the note is given at half too.
func RankNote(learnt []int, rank int) string {
	if len(learnt) == 0 || rank < 1 {
		return ""
	}
	lo, hi := learnt[0], learnt[len(learnt)-1]
	if 2*rank >= lo && rank < 2*hi {
		return ""
	}
	at := "rank " + strconv.Itoa(lo)
	if len(learnt) > 1 {
		at = "ranks " + joinInts(learnt)
	}
	return fmt.Sprintf("the model learnt from times at %s, not %d, and the fastest format moves with the rank (docs/model.md); sparsetune tune-model --rank %d learns this machine at it", at, rank, rank)
}

// Total returns the time the prediction took: sample, features, encoding
// and inference.
func (p *Prediction) Total() time.Duration { return p.Sample + p.Features + p.Encoding + p.Infer }

// Best returns the top-ranked format.
func (p *Prediction) Best() string { return p.Formats[0].Format }

// SummaryFreePredictor is a predictor that can answer for some (op,
// device) with nothing of the tensor (the hand rule, or a model head that
// defers to it): callers ask it first and summarise the tensor only when
// ok is false, so such a decision costs nothing next to the kernel.
type SummaryFreePredictor interface {
	PredictWithoutSummary(op hetero.Op, mode int, dev hetero.Info) (pr *Prediction, ok bool)
}

// Predictor ranks the candidate formats of op along mode (0-based) of x
// for a device kind.
type Predictor interface {
	Predict(x *formats.COO, op hetero.Op, mode int, kind hetero.Kind) (*Prediction, error)
}

// SummaryPredictor is a Predictor that works from a tensor's summary, so
// that one pass over the tensor serves every op and mode.
type SummaryPredictor interface {
	Predictor
	PredictSummary(s *features.Summary, op hetero.Op, mode int, kind hetero.Kind) (*Prediction, error)
}

// DevicePredictor is a SummaryPredictor that tells device classes apart
// (hetero.Info.Class), where a kind alone is ambiguous: PoCL and a GPU are
// both accelerators. A caller that predicts for several devices with one
// predictor passes each device's Info.
type DevicePredictor interface {
	SummaryPredictor
	PredictDevice(s *features.Summary, op hetero.Op, mode int, dev hetero.Info) (*Prediction, error)
}

// RankedPredictor is a predictor whose answer depends on the rank R of
// the op's dense operands: a model with heads learnt at several ranks
// (Info.HeadAtRank). A caller that knows the rank asks AtRank for the
// predictor to use at it (see AtRank).
type RankedPredictor interface {
	AtRank(rank int) SummaryPredictor
}

// AtRank returns p's predictor for decisions at rank: p.AtRank(rank)
// when p tells ranks apart (RankedPredictor), else p.
func AtRank(p SummaryPredictor, rank int) SummaryPredictor {
	if rp, ok := p.(RankedPredictor); ok {
		return rp.AtRank(rank)
	}
	return p
}

// PredictOn predicts from s for the device dev: through PredictDevice
// when p tells device classes apart, else by dev's kind. Callers that
// predict for several devices with one predictor use it, so that each
// device gets its own head.
//
// A GCNPredictor is told apart by its type before any interface is asked
// for: an assertion to an interface makes the runtime build the method
// table of the pair on first use, in memory it takes fresh, a page fault
// in the first decision of a fresh process (docs/model.md, "Where a
// fresh decision's time goes").
func PredictOn(p SummaryPredictor, s *features.Summary, op hetero.Op, mode int, dev hetero.Info) (*Prediction, error) {
	switch q := p.(type) {
	case GCNPredictor:
		return q.PredictDevice(s, op, mode, dev)
	case DevicePredictor:
		return q.PredictDevice(s, op, mode, dev)
	}
	return p.PredictSummary(s, op, mode, dev.Kind)
}

// viaSummary summarises x and predicts from the summary, counting the
// summary's time in the prediction.
func viaSummary(p SummaryPredictor, x *formats.COO, op hetero.Op, mode int, kind hetero.Kind) (*Prediction, error) {
	if mode < 0 || mode >= x.Order() {
		return nil, fmt.Errorf("mode %d out of range for an order-%d tensor", mode+1, x.Order())
	}
	start := time.Now()
	s, err := features.Summarize(x)
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	pr, err := p.PredictSummary(s, op, mode, kind)
	if err != nil {
		return nil, err
	}
	pr.Sample = took
	return pr, nil
}

// rank sorts formats by score, best first; ties keep the given order.
func rank(names []string, scores []float64) []Ranked {
	r := make([]Ranked, len(names))
	for i := range names {
		r[i] = Ranked{names[i], scores[i]}
	}
	slices.SortStableFunc(r, func(a, b Ranked) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	return r
}

// ErrNoHead is wrapped by a GCN prediction for a device class the model
// has no head for. A caller measures such a device instead (MeasureAll),
// never asks another class's head.
var ErrNoHead = errors.New("it was not trained on this kind of hardware")

// GCNPredictor runs a model file: one head per device class
// (hetero.Info.Class: "cpu", "opencl-cpu", "opencl-gpu", "cuda-gpu", ...),
// for the op the file was trained on. Labels belong to the hardware they
// were measured on, so a device whose class has no head gets an error,
// never another class's head.
type GCNPredictor struct {
	Model *ONNXModel
	// Class is the device class whose head answers. Empty means the host
	// CPU's class ("cpu") for the CPU kind; an accelerator has no class
	// implied by its kind (PoCL and a GPU are both accelerators), so it
	// needs Class set.
	Class string
	// Network, when set, answers with the network for every head, even
	// where the file answers with the rule (Info.RuleHeads) or with trees
	// (Info.TreeHeads): for comparing them.
	Network bool
	// DeviceModel is the device's model (hetero.Info.Model), which
	// PredictDevice sets: a CPU's processor, a cpu head that learnt from
	// other processors' times (Info.CPUModels) answering with a warning,
	// or the name a PoCL device gives the processor it compiles for,
	// which picks its head (DeviceTarget).
	DeviceModel string
	// DeviceFamily is the device's family number (hetero.Info.Family),
	// which PredictDevice sets: with DeviceModel, the processor (Processor)
	// whose head answers where the model has heads per family number.
	DeviceFamily int
	// Rank is the rank R of the op's dense operands: of a class's heads
	// learnt at several ranks, the one nearest to it answers
	// (Info.HeadAtRank). 0 means the class's own head, whatever its rank.
	Rank int
}

// AtRank returns the predictor for decisions at rank R (GCNPredictor.Rank).
func (p GCNPredictor) AtRank(rank int) SummaryPredictor {
	p.Rank = rank
	return p
}

// Predict summarises x and runs the model (see PredictSummary).
func (p GCNPredictor) Predict(x *formats.COO, op hetero.Op, mode int, kind hetero.Kind) (*Prediction, error) {
	return viaSummary(p, x, op, mode, kind)
}

// headFor returns the index of the head for the predictor's class on
// this machine (Info.HeadFor), and the warning that goes with it.
func (p GCNPredictor) headFor(kind hetero.Kind) (int, string, error) {
	info := &p.Model.Info
	class := p.Class
	if class == "" {
		if kind != hetero.CPU {
			return -1, "", fmt.Errorf("model %s: a %s device needs its device class to pick a head (heads: %v)", info.Path, kind, headNames(info.Heads))
		}
		class = cpuClass
	}
	head, warning := p.Model.hostHead(class, p.DeviceModel, p.DeviceFamily, p.Rank)
	if head < 0 {
		return -1, "", fmt.Errorf("model %s has no head for device class %s (heads: %v): %w", info.Path, class, headNames(info.Heads), ErrNoHead)
	}
	return head, warning, nil
}

// byRule reports whether head answers with the hand rule: evaluation
// found the rule better than the network for it (Info.RuleHeads), and
// the network is not asked for anyway.
func (p GCNPredictor) byRule(head int) bool {
	return !p.Network && slices.Contains(p.Model.Info.RuleHeads, p.Model.Info.Heads[head].Name)
}

// asksNetwork reports whether a decision of head, whose trees are t (nil
// for a head without trees), may run the network: one asked for, a head
// without trees, and one whose trees blend with it where they are unsure.
func (p GCNPredictor) asksNetwork(head int, t treeScorer) bool {
	_, blends := p.Model.Info.BlendMargins[p.Model.Info.Heads[head].Name]
	return p.Network || t == nil || blends
}

// PredictWithoutSummary answers for a device whose head defers to the
// rule (Info.RuleHeads), which needs no summary of the tensor; ok is
// false for every other device, which needs PredictDevice.
func (p GCNPredictor) PredictWithoutSummary(op hetero.Op, mode int, dev hetero.Info) (*Prediction, bool) {
	info := &p.Model.Info
	if op.String() != info.Op {
		return nil, false
	}
	head, warning := p.Model.hostHead(dev.Class(), dev.Model, dev.Family, p.Rank)
	if head < 0 || !p.byRule(head) {
		return nil, false
	}
	pr, _ := RulePredictor{}.PredictWithoutSummary(op, mode, dev)
	pr.By, pr.Head = "rule", info.Heads[head].Name
	if warning != "" {
		pr.Warnings = append(pr.Warnings, warning)
	}
	return pr, true
}

// PredictDevice runs the head of the device's class, whatever the
// predictor's Class: one GCNPredictor serves every device of a run.
func (p GCNPredictor) PredictDevice(s *features.Summary, op hetero.Op, mode int, dev hetero.Info) (*Prediction, error) {
	p.Class, p.DeviceModel, p.DeviceFamily = dev.Class(), dev.Model, dev.Family
	return p.PredictSummary(s, op, mode, dev.Kind)
}

// Load reads what the device's predictions need of the model and a
// load of a sealed file leaves for their first use: its head's trees,
// every page of them, and the graph where the network may be asked (a
// head without trees, one that blends, or p.Network). A caller that
// times its decisions calls it first, so that they are timed without
// any of the file's load, and a one-shot command calls it while it reads
// the tensor; a device the model has no head for is left to the
// prediction to report.
func (p GCNPredictor) Load(dev hetero.Info) error {
	info := &p.Model.Info
	head, _ := p.Model.hostHead(dev.Class(), dev.Model, dev.Family, p.Rank)
	if head < 0 {
		return nil
	}
	if p.byRule(head) {
		return nil
	}
	network := p.Network
	if !p.Network {
		t, err := info.scorer(info.Heads[head].Name)
		if err != nil {
			return err
		}
		if pt, ok := t.(*packedTrees); ok {
			pt.touch()
		}
		network = p.asksNetwork(head, t)
	}
	if network {
		if err := p.Model.graph(); err != nil {
			return fmt.Errorf("model %s: %w", info.Path, err)
		}
	}
	return nil
}

// SummaryInput computes the model input of op along mode (0-based) from a
// tensor's summary: the global features (Summary.Global) and the graph
// (graphenc.Encode of the summary's sample) at the budget, and the time
// each took. GCNPredictor and training both call it, so a model is
// trained on exactly the inputs it later sees.
func SummaryInput(s *features.Summary, op hetero.Op, mode int, budget graphenc.Budget) (in *Input, feat, enc time.Duration, err error) {
	if _, err := graphenc.ShapeFor(op, s.Dims, mode); err != nil {
		return nil, 0, 0, err
	}
	start := time.Now()
	v, err := s.Global(op, mode)
	if err != nil {
		return nil, 0, 0, err
	}
	feat = time.Since(start)
	g, enc, err := summaryGraph(s, op, mode, budget)
	if err != nil {
		return nil, 0, 0, err
	}
	return NewInput(g, v), feat, enc, nil
}

// summaryGraph returns the graph of op along mode from the summary, and
// the time it took.
func summaryGraph(s *features.Summary, op hetero.Op, mode int, budget graphenc.Budget) (*graphenc.Graph, time.Duration, error) {
	shape, err := graphenc.ShapeFor(op, s.Dims, mode)
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	g, err := s.Encode(shape, budget)
	return g, time.Since(start), err
}

// PredictSummary computes the global features and the graph from the
// summary, and runs the model's head for the device class.
func (p GCNPredictor) PredictSummary(s *features.Summary, op hetero.Op, mode int, kind hetero.Kind) (*Prediction, error) {
	info := &p.Model.Info
	if op.String() != info.Op {
		return nil, fmt.Errorf("model %s predicts for %s, not %s", info.Path, info.Op, op)
	}
	head, warning, err := p.headFor(kind)
	if err != nil {
		return nil, err
	}
	if p.byRule(head) {
		// Evaluation found the rule better than the network for this
		// head (docs/model.md): answer with it.
		pr, err := RulePredictor{}.PredictSummary(s, op, mode, kind)
		if err != nil {
			return nil, err
		}
		pr.By, pr.Head = "rule", info.Heads[head].Name
		if warning != "" {
			pr.Warnings = append(pr.Warnings, warning)
		}
		return pr, nil
	}
	// The rule above is no one machine's; what the trees and the network
	// learnt is (docs/model.md, "On a machine it never saw"). A head
	// chosen with a warning has said so already.
	if warning == "" {
		warning = info.otherCPU(head, p.DeviceModel, p.DeviceFamily)
	}
	var pr *Prediction
	var v features.Vector
	t, err := info.scorer(info.Heads[head].Name)
	if err != nil {
		return nil, err
	}
	if t != nil && !p.Network {
		// Evaluation found the trees on the global features at least as
		// good as the network for this head: they need no graph and no
		// network run.
		start := time.Now()
		if v, err = s.Global(op, mode); err != nil {
			return nil, err
		}
		pr = &Prediction{Features: time.Since(start), By: "boosted"}
		start = time.Now()
		probs := t.Probs(v[:])
		pr.Infer = time.Since(start)
		if margin := info.BlendMargins[info.Heads[head].Name]; TopMargin(probs) < margin {
			// The trees are unsure: the network is asked too, and the
			// answer is the mean of the two (docs/model.md, "The
			// blend").
			g, enc, err := summaryGraph(s, op, mode, info.Budget)
			if err != nil {
				return nil, err
			}
			pr.Encoding = enc
			start = time.Now()
			np, err := p.Model.RunHead(NewInput(g, v), head)
			if err != nil {
				return nil, err
			}
			probs = Blend(np, probs)
			pr.Infer += time.Since(start)
			pr.By = "blend"
		}
		pr.Formats = rank(info.Heads[head].Classes, probs)
	} else {
		in, feat, enc, err := SummaryInput(s, op, mode, info.Budget)
		if err != nil {
			return nil, err
		}
		pr = &Prediction{Features: feat, Encoding: enc}
		start := time.Now()
		probs, err := p.Model.RunHead(in, head)
		if err != nil {
			return nil, err
		}
		pr.Infer = time.Since(start)
		pr.Formats = rank(info.Heads[head].Classes, probs)
		v = in.Global
	}
	pr.LearntRanks, pr.Head = info.HeadLabelRanks(info.Heads[head].Name), info.Heads[head].Name
	if warning != "" {
		pr.Warnings = append(pr.Warnings, warning)
	}
	for i := range features.Count {
		if v[i] < info.TrainMin[i] || v[i] > info.TrainMax[i] {
			pr.Warnings = append(pr.Warnings, fmt.Sprintf("feature %s = %.4g is outside the training range [%.4g, %.4g]", features.Names[i], v[i], info.TrainMin[i], info.TrainMax[i]))
		}
	}
	return pr, nil
}

func headNames(hs []Head) []string {
	var n []string
	for _, h := range hs {
		n = append(n, h.Name)
	}
	return n
}

// RulePredictor is the hand rule: the format that was most often the
// fastest in the default model's labels, per op and device kind
// (docs/model.md). It began as a rule a person would write from the
// formats' cost models (padding, fiber lengths); the measurements
// replaced every such branch:
//
// SpTTM: CSR on every device. ELL, HYB and COO on short fibers lose to it
// on a CPU, and on an H100 CSR was the fastest or within a few per cent.
//
// MTTKRP: CSF on a CPU; COO on an accelerator, whose CSF and ALTO kernels
// lose on short modes.
type RulePredictor struct{}

// Predict summarises x and applies the rule.
func (r RulePredictor) Predict(x *formats.COO, op hetero.Op, mode int, kind hetero.Kind) (*Prediction, error) {
	if err := formats.CheckMode(mode, x.Order()); err != nil {
		return nil, err
	}
	return &Prediction{Formats: RuleRank(op, kind)}, nil
}

// PredictSummary applies the rule; it reads nothing of the summary but
// its order, to check the mode.
func (RulePredictor) PredictSummary(s *features.Summary, op hetero.Op, mode int, kind hetero.Kind) (*Prediction, error) {
	if err := formats.CheckMode(mode, len(s.Dims)); err != nil {
		return nil, err
	}
	return &Prediction{Formats: RuleRank(op, kind)}, nil
}

// PredictWithoutSummary applies the rule, which needs nothing of the
// tensor: ok is always true.
func (RulePredictor) PredictWithoutSummary(op hetero.Op, mode int, dev hetero.Info) (*Prediction, bool) {
	start := time.Now()
	pr := &Prediction{Formats: RuleRank(op, dev.Kind)}
	pr.Features = time.Since(start) // the whole decision, reported as its features
	return pr, true
}

// RuleChoice is the hand rule's format for op on a device of the given
// kind (see RulePredictor): it needs nothing of the tensor.
func RuleChoice(op hetero.Op, kind hetero.Kind) string {
	if op == hetero.SpTTM {
		// CSR on every device. On the CPU it was the fastest in 83% of
		// 4,110 labelled decisions, COO for short fibers in 17%, ELL and
		// HYB never: their padding costs more than their regular access
		// saves. On an H100 it was the fastest in 58% of 5,115 and within
		// 8% of the best on average (oracle ratio 0.921); the padded
		// formats' branches the rule had before were right in 39%
		// (docs/model.md, the training report).
		return "csr"
	}
	if kind == hetero.GPU {
		// COO on an accelerator: one atomic add per run of a row keeps
		// every lane busy whatever the shape, where CSF gives a work-item
		// to each root fiber and ALTO's runs collide on short modes. It
		// was the fastest in 90% of 5,113 decisions on an H100; the old
		// CSF/ALTO branches in 5% (docs/gpu.md, docs/model.md).
		return "coo"
	}
	// CSF on the CPU whatever the fibers: always-CSF was right in 68% of
	// 4,110 labelled decisions, the old "COO for short fibers" branch in
	// under half (docs/model.md).
	return "csf"
}

// RuleRank ranks op's formats by the hand rule: its choice first with
// score 1, the others 0.
func RuleRank(op hetero.Op, kind hetero.Kind) []Ranked {
	best := RuleChoice(op, kind)
	names := op.Formats()
	scores := make([]float64, len(names))
	for i, n := range names {
		if n == best {
			scores[i] = 1
		}
	}
	return rank(names, scores)
}

// MeasureAll times every candidate format with the real kernels on a
// device and ranks them by speed: the oracle, and the labeller of
// training data. Brute force runs Iters timed runs of every format,
// interleaved (hetero.MeasureFormats); Greedy first runs each format once,
// drops those slower than Cut times the fastest, and times only the rest
// fully (the paper's early cut).
type MeasureAll struct {
	Device hetero.Device
	Rank   int     // R of the dense operands
	Iters  int     // timed runs per format
	Greedy bool    // early cut
	Cut    float64 // the greedy cut-off ratio; 0 means 1.5
	// Measured, when set, receives every measurement made.
	Measured func(*hetero.Measurement)
}

// Predict measures; kind must be the device's.
func (m MeasureAll) Predict(x *formats.COO, op hetero.Op, mode int, kind hetero.Kind) (*Prediction, error) {
	info := m.Device.Info()
	if info.Kind != kind {
		return nil, fmt.Errorf("measure: device %s is a %s, asked for %s", info.Name, info.Kind, kind)
	}
	start := time.Now()
	names := op.Formats()
	secs := make([]float64, len(names))
	if m.Iters < 1 {
		return nil, fmt.Errorf("measure: iters must be at least 1, found %d", m.Iters)
	}
	// measure times the formats idx names, interleaved, iters runs each.
	measure := func(idx []int, iters int) error {
		group := make([]string, len(idx))
		for k, i := range idx {
			group[k] = names[i]
		}
		ms, err := hetero.MeasureFormats(m.Device, x, op, mode, group, m.Rank, func(time.Duration) int { return iters })
		if err != nil {
			return fmt.Errorf("measure %s mode %d: %s on %s: %w", op, mode+1, strings.Join(group, ", "), info.Name, err)
		}
		for k, i := range idx {
			if m.Measured != nil {
				m.Measured(ms[k])
			}
			secs[i] = ms[k].Seconds
			if ms[k].Skipped != "" {
				secs[i] = 0
			}
		}
		return nil
	}
	fastestOf := func() float64 {
		fastest := 0.0
		for _, s := range secs {
			if s > 0 && (fastest == 0 || s < fastest) {
				fastest = s
			}
		}
		return fastest
	}
	candidates := make([]int, len(names))
	for i := range candidates {
		candidates[i] = i
	}
	if m.Greedy {
		// One run of each, one format at a time.
		for i := range names {
			if err := measure([]int{i}, 1); err != nil {
				return nil, err
			}
		}
		fastest := fastestOf()
		cut := m.Cut
		if cut <= 0 {
			cut = 1.5
		}
		candidates = candidates[:0]
		for i, s := range secs {
			if s > 0 && s <= cut*fastest {
				candidates = append(candidates, i)
			}
		}
	}
	// The full timing interleaves the candidates, one run of each per
	// round, so that a machine's drift slows them alike (as label does).
	if err := measure(candidates, m.Iters); err != nil {
		return nil, err
	}
	// The fastest over every format measured, cut ones included: under
	// load a candidate's median can come out slower than a cut format's
	// single run, and a score must stay in [0, 1].
	fastest := fastestOf()
	if fastest == 0 {
		return nil, fmt.Errorf("measure: no format could run %s mode %d on %s", op, mode+1, info.Name)
	}
	scores := make([]float64, len(names))
	for i, s := range secs {
		if s > 0 {
			scores[i] = fastest / s // cut formats keep their one-run speed
		}
	}
	return &Prediction{Formats: rank(names, scores), Infer: time.Since(start)}, nil
}
