package train

import (
	"cmp"
	"maps"
	"math"
	"slices"
)

// Predictor names in reports, besides "always FORMAT" for each fixed
// format and the baselines' method names ("tree", "knn").
const (
	PredictorGCN     = "gcn"
	PredictorRule    = "rule"
	PredictorMeasure = "measure-all"
	// PredictorDefault is what a model file answers as the default
	// predictor: its network, the rule for its rule heads
	// (model.Info.RuleHeads) or the trees for its tree heads
	// (model.Info.TreeHeads).
	PredictorDefault = "default"
	// PredictorBoosted is boosted trees on the global features
	// (model.FitTrees): cross-validated by Fit for every head, and a
	// model file's own for its tree heads in Evaluate.
	PredictorBoosted = "boosted"
	// PredictorBlend is the mean of the network's and the boosted
	// trees' probabilities (model.Blend): cross-validated by Fit for
	// every head, and a model file's own for its heads with trees in
	// Evaluate.
	PredictorBlend = "blend"
)

// RuleMargin is how far the network's oracle ratio must lead the hand
// rule's for a head to answer with the network: half a percent of the
// run time. The rule costs nothing to ask, where the network costs a
// decision its features, encoding and inference, and a lead smaller
// than this is below what users feel and what the labels resolve: the
// same head scored 0.977 and 0.982 on two timings of the same tensors
// (docs/model.md, "SpTTM on the AVX-512 VM's PoCL, and the rule's
// margin").
const RuleMargin = 0.005

// RuleHeads returns, per op and sorted, the device classes for which the
// scores do not put the GCN's oracle ratio (the run time users feel)
// ahead of the hand rule's by RuleMargin or more, whatever their
// accuracies. The model defers to the rule for them
// (model.GCN.RuleHeads), as the brief asks of a baseline that beats the
// network. Until 2026-11-29 the rule answered only where both its oracle
// ratio and its accuracy were no lower than the network's, so a network
// more accurate by 0.007 with the same oracle ratio answered at the cost
// of a decision. Scores limited to a nonzero bucket are not a head's.
// (Trees are compared with the GCN by chooseTrees, on the rows'
// probabilities.)
func RuleHeads(scores []Score) map[string][]string {
	type key struct{ op, class string }
	gcn, rule := map[key]Score{}, map[key]Score{}
	for _, s := range scores {
		if s.NNZBucket != "" {
			continue
		}
		switch s.Predictor {
		case PredictorGCN:
			gcn[key{s.Op, s.DeviceClass}] = s
		case PredictorRule:
			rule[key{s.Op, s.DeviceClass}] = s
		}
	}
	out := map[string][]string{}
	for k, g := range gcn {
		r, ok := rule[k]
		if ok && r.N > 0 && g.OracleRatio-r.OracleRatio < RuleMargin {
			out[k.op] = append(out[k.op], k.class)
		}
	}
	for _, cs := range out {
		slices.Sort(cs)
	}
	return out
}

// fixedPrefix starts the name of a fixed-format predictor: "always coo".
const fixedPrefix = "always "

// Picks is one predictor's answer for each scored row: Formats[i] is the
// format it picked for row i, or "" where it made no pick (a fixed format
// of another op, a class with no head, a group with no training rows).
type Picks struct {
	Predictor string
	Formats   []string
}

// Score is one line of an evaluation report: how a predictor did on the
// rows of one op and device class. Accuracy counts picks of the fastest
// format; TieAccuracy picks within NearTie of it (in NearTies, or a time at
// most (1+NearTie)·best); OracleRatio is the geometric mean over the rows
// of t(best)/t(picked), 1 for a perfect predictor. A picked format the row
// did not time (skipped on that device) counts as wrong and costs the
// slowest timed format's time, as if the run fell back to the worst
// choice. MeasureCost is set for measure-all only: the geometric mean over
// the rows of what measuring costs (every timed format's median run plus
// every conversion) in multiples of the best format's run.
type Score struct {
	Op          string  `json:"op"`
	DeviceClass string  `json:"device_class"`
	Predictor   string  `json:"predictor"`
	N           int     `json:"n"`
	Accuracy    float64 `json:"accuracy"`
	TieAccuracy float64 `json:"tie_accuracy"`
	OracleRatio float64 `json:"oracle_ratio"`
	MeasureCost float64 `json:"measure_cost,omitempty"`
	// NNZBucket names the NNZBuckets range the score is limited to
	// (ScoresByNNZ); empty for a score over every row.
	NNZBucket string `json:"nnz_bucket,omitempty"`
}

// minSeconds floors times in ratios: a zero median (a kernel below the
// clock's resolution) must not make a ratio infinite or zero.
const minSeconds = 1e-9

// Outcome is how one pick fared on one row: strict and tie-aware
// correctness and t(best)/t(picked).
func Outcome(r *LabelRow, pick string) (correct, tie bool, ratio float64) {
	best := max(r.Times[r.Label], minSeconds)
	t, ok := r.Times[pick]
	if !ok {
		slowest := best
		for _, s := range r.Times {
			slowest = max(slowest, s)
		}
		return false, false, best / slowest
	}
	t = max(t, minSeconds)
	correct = pick == r.Label
	tie = correct || slices.Contains(r.NearTies, pick) || t <= (1+NearTie)*best
	return correct, tie, min(best/t, 1)
}

// MeasureCost is what measure-all spends on a row to find its best
// format, in multiples of the best format's run: every timed format's
// median run plus every conversion.
func MeasureCost(r *LabelRow) float64 {
	// Summed in sorted order: map order would change the last bits.
	s := 0.0
	for _, m := range []map[string]float64{r.Times, r.ConvertSeconds} {
		for _, f := range slices.Sorted(maps.Keys(m)) {
			s += m[f]
		}
	}
	return s / max(r.Times[r.Label], minSeconds)
}

// groupKey is an (op, device class) pair: a head.
type groupKey struct{ op, class string }

// Scores evaluates each predictor's picks per (op, device class), in op,
// then class order, predictors in the order given, and adds measure-all
// (accuracy and ratio 1 by definition, with its cost) last in each group.
// A predictor with no pick in a group has no line for it. Rows must be
// labelled (Label not empty).
func Scores(rows []LabelRow, picks []Picks) []Score {
	return scores(rows, picks, false)
}

// scores is Scores, and with byNNZ ScoresByNNZ: each head's rows split
// further by NNZBuckets range, ranges in order within a head.
func scores(rows []LabelRow, picks []Picks, byNNZ bool) []Score {
	type key struct {
		groupKey
		bucket int // index in NNZBuckets; -1 for every row of the head
	}
	groups := map[key][]int{}
	for i := range rows {
		k := key{groupKey{rows[i].Op, rows[i].DeviceClass}, -1}
		if byNNZ {
			k.bucket = nnzBucket(rows[i].NNZ)
		}
		groups[k] = append(groups[k], i)
	}
	keys := slices.SortedFunc(maps.Keys(groups), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.op, b.op), cmp.Compare(a.class, b.class), cmp.Compare(a.bucket, b.bucket))
	})
	var out []Score
	for _, k := range keys {
		bucket := ""
		if k.bucket >= 0 {
			bucket = NNZBuckets[k.bucket].Name
		}
		for _, p := range picks {
			s := Score{Op: k.op, DeviceClass: k.class, Predictor: p.Predictor, NNZBucket: bucket}
			var logSum float64
			for _, i := range groups[k] {
				if p.Formats[i] == "" {
					continue
				}
				c, tie, ratio := Outcome(&rows[i], p.Formats[i])
				s.N++
				if c {
					s.Accuracy++
				}
				if tie {
					s.TieAccuracy++
				}
				logSum += math.Log(ratio)
			}
			if s.N == 0 {
				continue
			}
			n := float64(s.N)
			s.Accuracy, s.TieAccuracy, s.OracleRatio = s.Accuracy/n, s.TieAccuracy/n, math.Exp(logSum/n)
			out = append(out, s)
		}
		m := Score{Op: k.op, DeviceClass: k.class, Predictor: PredictorMeasure, NNZBucket: bucket, N: len(groups[k]), Accuracy: 1, TieAccuracy: 1, OracleRatio: 1}
		var logCost float64
		for _, i := range groups[k] {
			logCost += math.Log(MeasureCost(&rows[i]))
		}
		m.MeasureCost = math.Exp(logCost / float64(m.N))
		out = append(out, m)
	}
	return out
}

// NNZBuckets are the nonzero ranges of the paper's Table 4, for the
// oracle ratio by size: [0, 100), [100, 1K), [1K, 10K), [10K, 100K) and
// 100K or more.
var NNZBuckets = []struct {
	Name   string
	Lo, Hi int // Lo <= nnz < Hi; Hi 0 means no upper bound
}{{"0-100", 0, 100}, {"100-1K", 100, 1000}, {"1K-10K", 1000, 10000}, {"10K-100K", 10000, 100000}, {">100K", 100000, 0}}

// ScoresByNNZ is Scores for the rows of each NNZBuckets range, each
// score naming its range, ordered by op, device class, then range; a
// range without rows has no scores. It shows where a predictor is weak:
// a model can lead on the many small tensors of a set and trail on its
// large ones, whose kernels cost most.
func ScoresByNNZ(rows []LabelRow, picks []Picks) []Score {
	return scores(rows, picks, true)
}

// nnzBucket returns the index in NNZBuckets of a tensor of nnz nonzeros.
func nnzBucket(nnz int) int {
	for i, b := range NNZBuckets {
		if nnz >= b.Lo && (b.Hi == 0 || nnz < b.Hi) {
			return i
		}
	}
	return len(NNZBuckets) - 1
}

// RatioByBucket returns a predictor's oracle ratio (geometric mean of
// t(best)/t(picked)) per NNZBuckets entry over all its picks, and the
// number of rows in each; a bucket with no rows has ratio 0.
func RatioByBucket(rows []LabelRow, p Picks) (ratio []float64, n []int) {
	ratio, n = make([]float64, len(NNZBuckets)), make([]int, len(NNZBuckets))
	for i := range rows {
		if p.Formats[i] == "" {
			continue
		}
		_, _, r := Outcome(&rows[i], p.Formats[i])
		b := nnzBucket(rows[i].NNZ)
		ratio[b] += math.Log(r)
		n[b]++
	}
	for b := range ratio {
		if n[b] > 0 {
			ratio[b] = math.Exp(ratio[b] / float64(n[b]))
		}
	}
	return ratio, n
}

// Confusion counts, for the rows of one op and device class, how often
// each true label (row) met each pick (column), formats in the op's
// candidate order; rows the predictor did not pick for are left out.
func Confusion(rows []LabelRow, p Picks, op, class string, formats []string) [][]int {
	m := make([][]int, len(formats))
	for i := range m {
		m[i] = make([]int, len(formats))
	}
	for i := range rows {
		if rows[i].Op != op || rows[i].DeviceClass != class || p.Formats[i] == "" {
			continue
		}
		a, b := slices.Index(formats, rows[i].Label), slices.Index(formats, p.Formats[i])
		if a >= 0 && b >= 0 {
			m[a][b]++
		}
	}
	return m
}
