package train

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/kernels"
	"github.com/sparsetune/sparsetune/model"
)

// TestGroupFolds: rows of one source always share a fold, every fold is
// used, the same seed gives the same folds, and too few sources is an
// error.
func TestGroupFolds(t *testing.T) {
	var rows []LabelRow
	for i := range 200 {
		// Sources of uneven sizes: source s has s%7+1 rows.
		for j := range i%7 + 1 {
			rows = append(rows, LabelRow{Source: fmt.Sprintf("m%03d.mtx", i), Tensor: fmt.Sprintf("t%d_%d", i, j)})
		}
	}
	for _, k := range []int{2, 5, 10} {
		folds, err := GroupFolds(rows, k, 42)
		if err != nil {
			t.Fatal(err)
		}
		of := map[string]int{}
		size := make([]int, k)
		for i, r := range rows {
			if f, ok := of[r.Source]; ok && f != folds[i] {
				t.Fatalf("k=%d: source %s in folds %d and %d", k, r.Source, f, folds[i])
			}
			of[r.Source] = folds[i]
			size[folds[i]]++
		}
		if slices.Min(size) == 0 || slices.Max(size)-slices.Min(size) > 7 {
			t.Errorf("k=%d: fold sizes %v, want balanced within one source", k, size)
		}
		again, _ := GroupFolds(rows, k, 42)
		if !slices.Equal(folds, again) {
			t.Errorf("k=%d: same seed, different folds", k)
		}
		other, _ := GroupFolds(rows, k, 43)
		if slices.Equal(folds, other) {
			t.Errorf("k=%d: seeds 42 and 43 give the same folds", k)
		}
	}
	if _, err := GroupFolds(rows[:3], 5, 1); err == nil || !strings.Contains(err.Error(), "needs at least 5 sources, the rows have 2") {
		t.Errorf("too few sources: %v", err)
	}
}

// TestScores checks accuracy, tie accuracy, oracle ratio and measure-all's
// cost on hand-made rows.
func TestScores(t *testing.T) {
	rows := []LabelRow{
		{Op: "ttm", DeviceClass: "cpu", NNZ: 50, Times: map[string]float64{"coo": 1, "csr": 2, "ell": 1.02, "hyb": 4},
			ConvertSeconds: map[string]float64{"coo": 0.5}, Label: "coo", NearTies: []string{"coo", "ell"}},
		{Op: "ttm", DeviceClass: "cpu", NNZ: 5000, Times: map[string]float64{"coo": 2, "csr": 1},
			Skipped: map[string]string{"ell": "padding", "hyb": "padding"}, Label: "csr", NearTies: []string{"csr"}},
		{Op: "ttm", DeviceClass: "opencl-cpu", NNZ: 500, Times: map[string]float64{"coo": 1, "csr": 1}, Label: "coo", NearTies: []string{"coo", "csr"}},
	}
	picks := []Picks{
		{Predictor: "p", Formats: []string{"ell", "ell", "csr"}},
		{Predictor: "q", Formats: []string{"coo", "coo", ""}},
	}
	got := Scores(rows, picks)
	want := []Score{
		{Op: "ttm", DeviceClass: "cpu", Predictor: "p", N: 2, Accuracy: 0, TieAccuracy: 0.5, OracleRatio: math.Sqrt(1 / 1.02 * 0.5)},
		{Op: "ttm", DeviceClass: "cpu", Predictor: "q", N: 2, Accuracy: 0.5, TieAccuracy: 0.5, OracleRatio: math.Sqrt(0.5)},
		{Op: "ttm", DeviceClass: "cpu", Predictor: PredictorMeasure, N: 2, Accuracy: 1, TieAccuracy: 1, OracleRatio: 1, MeasureCost: math.Sqrt(8.52 * 3)},
		{Op: "ttm", DeviceClass: "opencl-cpu", Predictor: "p", N: 1, Accuracy: 0, TieAccuracy: 1, OracleRatio: 1},
		{Op: "ttm", DeviceClass: "opencl-cpu", Predictor: PredictorMeasure, N: 1, Accuracy: 1, TieAccuracy: 1, OracleRatio: 1, MeasureCost: 2},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d scores, want %d: %+v", len(got), len(want), got)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	for i, w := range want {
		g := got[i]
		if g.Op != w.Op || g.DeviceClass != w.DeviceClass || g.Predictor != w.Predictor || g.N != w.N ||
			!near(g.Accuracy, w.Accuracy) || !near(g.TieAccuracy, w.TieAccuracy) || !near(g.OracleRatio, w.OracleRatio) || !near(g.MeasureCost, w.MeasureCost) {
			t.Errorf("score %d: got %+v, want %+v", i, g, w)
		}
	}
	ratio, n := RatioByBucket(rows, picks[0])
	if !slices.Equal(n, []int{1, 1, 1, 0, 0}) || !near(ratio[0], 1/1.02) || !near(ratio[1], 1) || !near(ratio[2], 0.5) || ratio[3] != 0 {
		t.Errorf("ratio by bucket %v, counts %v", ratio, n)
	}
	conf := Confusion(rows, picks[0], "ttm", "cpu", []string{"coo", "csr", "ell", "hyb"})
	if conf[0][2] != 1 || conf[1][2] != 1 || conf[0][0] != 0 {
		t.Errorf("confusion %v", conf)
	}
	// By nonzeros: the rows of 50 and 5,000 nonzeros fall in two ranges,
	// each scored alone; the range of 100-1K holds the PoCL row.
	byNNZ := ScoresByNNZ(rows, picks)
	type key struct{ class, bucket, predictor string }
	seen := map[key]Score{}
	var order []string
	for _, s := range byNNZ {
		seen[key{s.DeviceClass, s.NNZBucket, s.Predictor}] = s
		if len(order) == 0 || order[len(order)-1] != s.DeviceClass+" "+s.NNZBucket {
			order = append(order, s.DeviceClass+" "+s.NNZBucket)
		}
	}
	if want := []string{"cpu 0-100", "cpu 1K-10K", "opencl-cpu 100-1K"}; !slices.Equal(order, want) {
		t.Errorf("by nonzeros: groups %v, want %v", order, want)
	}
	if s := seen[key{"cpu", "0-100", "p"}]; s.N != 1 || s.Accuracy != 0 || s.TieAccuracy != 1 || !near(s.OracleRatio, 1/1.02) {
		t.Errorf("by nonzeros, cpu 0-100, p: %+v", s)
	}
	if s := seen[key{"cpu", "1K-10K", "q"}]; s.N != 1 || s.Accuracy != 0 || !near(s.OracleRatio, 0.5) {
		t.Errorf("by nonzeros, cpu 1K-10K, q: %+v", s)
	}
	if _, ok := seen[key{"opencl-cpu", "100-1K", "q"}]; ok {
		t.Errorf("by nonzeros: q scored where it picked nothing")
	}
	if s := seen[key{"cpu", "0-100", PredictorMeasure}]; s.N != 1 || !near(s.MeasureCost, 8.52) {
		t.Errorf("by nonzeros, measure-all: %+v", s)
	}
}

// TestFitWarnings: labels of two builds are warned about, and unlabelled
// rows are counted, before any tensor is read.
func TestFitWarnings(t *testing.T) {
	a, b := validRow(), validRow()
	b.Build.Go = "go1.0"
	b.Mode = 2
	c := validRow()
	c.Mode, c.Label, c.NearTies = 3, "", nil
	var warnings []string
	_, err := Fit([]LabelRow{a, b, c}, FitOptions{Dir: t.TempDir(), Folds: 1, Warn: func(s string) { warnings = append(warnings, s) }})
	if err == nil || !strings.Contains(err.Error(), "tensor "+a.Tensor) {
		t.Fatalf("missing tensor: %v", err)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], "the labels mix 2 builds") || !strings.Contains(warnings[1], "1 rows have no label") {
		t.Fatalf("warnings %q", warnings)
	}
	// Builds that differ only in the cpu rows' inner loops are two kinds
	// of hardware, each with its own head: said as such.
	a.Device, a.DeviceClass = "cpu", "cpu"
	b = a
	b.Build.InnerLoops = "elsewhere"
	warnings = nil
	Fit([]LabelRow{a, b}, FitOptions{Dir: t.TempDir(), Folds: 1, Warn: func(s string) { warnings = append(warnings, s) }})
	if len(warnings) != 1 || !strings.Contains(warnings[0], "2 kinds of CPU (avx2, elsewhere)") || !strings.Contains(warnings[0], "one cpu head per kind") {
		t.Fatalf("two CPUs' labels: warnings %q", warnings)
	}
	// So are processors of two families, in one build.
	a.DeviceModel = "AMD EPYC"
	b = a
	b.DeviceModel = "Intel(R) Xeon(R) Processor"
	warnings = nil
	Fit([]LabelRow{a, b}, FitOptions{Dir: t.TempDir(), Folds: 1, Warn: func(s string) { warnings = append(warnings, s) }})
	if len(warnings) != 1 || !strings.Contains(warnings[0], "2 kinds of CPU (avx2 on amd, avx2 on intel)") {
		t.Fatalf("two families' labels: warnings %q", warnings)
	}
}

// TestRankHeads trains on the tiny set's rows timed at two ranks: each
// rank gets a head of its own, the exported model records each head's
// rank, a prediction asks the head nearest its rank, and evaluation
// scores each rank's rows by its head.
func TestRankHeads(t *testing.T) {
	rows, labelsDir := labelTinySet(t)
	lo := cpuOptions()
	lo.Rank = 2 * rows[0].Rank
	out := filepath.Join(labelsDir, "labels-r8.jsonl")
	if _, err := Label(context.Background(), filepath.Join(labelsDir, "set"), out, lo); err != nil {
		t.Fatal(err)
	}
	more, err := ReadLabels(out)
	if err != nil {
		t.Fatal(err)
	}
	low, high := rows[0].Rank, lo.Rank
	// As many rows at each rank: the one nearer DefaultLabelRank keeps
	// the class's name.
	all := append(slices.Clone(rows), more...)
	var warnings []string
	o := FitOptions{Dir: labelsDir, Folds: 1, Seed: 3, Model: model.DefaultFitOptions, Warn: func(w string) { warnings = append(warnings, w) }}
	o.Model.Epochs = 2
	rep, err := Fit(all, o)
	if err != nil {
		t.Fatal(err)
	}
	lowHead := model.RankHead("cpu", low)
	if want := fmt.Sprintf("were timed at ranks [%d %d]: one head per rank (cpu at %d, %s)", low, high, high, lowHead); !strings.Contains(strings.Join(warnings, "\n"), want) {
		t.Errorf("warnings %q, want one containing %q", warnings, want)
	}
	exported := exportedModels(t, rep)
	for op, m := range exported {
		if want := map[string][]int{"cpu": {high}, lowHead: {low}}; !reflect.DeepEqual(m.Info.LabelRanks, want) {
			t.Errorf("%s model: label ranks %v, want %v", op, m.Info.LabelRanks, want)
		}
		if got := headNames(m.Info.Heads); !slices.Equal(got, []string{"cpu", lowHead}) {
			t.Fatalf("%s model: heads %v", op, got)
		}
		x, err := formats.ReadFile(filepath.Join(labelsDir, filepath.FromSlash(rows[0].Tensor)))
		if err != nil {
			t.Fatal(err)
		}
		s, err := features.Summarize(x)
		if err != nil {
			t.Fatal(err)
		}
		hop, _ := hetero.ParseOp(op)
		cpu := hetero.NewCPU(1).Info()
		for _, c := range []struct{ rank, learnt int }{{0, high}, {low, low}, {high, high}, {low / 2, low}, {8 * high, high}} {
			p := model.AtRank(model.GCNPredictor{Model: m}, c.rank)
			pr, err := model.PredictOn(p, s, hop, 0, cpu)
			if err != nil {
				t.Fatal(err)
			}
			if want := []int{c.learnt}; !slices.Equal(pr.LearntRanks, want) {
				t.Errorf("%s at rank %d: answered by the head learnt at %v, want %v", op, c.rank, pr.LearntRanks, want)
			}
		}
		if !m.Info.LearntAtRank(cpu, low) || m.Info.LearntAtRank(cpu, 4*high) {
			t.Errorf("%s: LearntAtRank is not the rank head's", op)
		}
	}
	// Evaluation scores the rows of one rank by the head learnt nearest
	// it, though they are rows of the class "cpu".
	models := slices.Collect(maps.Values(exported))
	ev, err := Evaluate(rows, models, FitOptions{Dir: labelsDir, Folds: 1})
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i, r := range ev.data.rows {
		m := models[slices.IndexFunc(models, func(m *model.ONNXModel) bool { return m.Info.Op == r.Op })]
		probs, err := m.Run(ev.data.inputs[i])
		if err != nil {
			t.Fatal(err)
		}
		h := m.Info.HeadIndex(lowHead)
		want := m.Info.Heads[h].Classes[argmax(probs[h])]
		if got := ev.Picks[0].Formats[i]; got != want {
			t.Errorf("row %d (%s mode %d, rank %d): evaluated pick %s, the %s head's %s", i+1, r.Op, r.Mode, r.Rank, got, lowHead, want)
		}
		if base := m.Info.HeadIndex("cpu"); m.Info.Heads[base].Classes[argmax(probs[base])] != want {
			differ++
		}
	}
	t.Logf("the heads at ranks %d and %d differ on %d of %d rows", low, high, differ, len(ev.data.rows))
	// Each rank's rows are scored apart, by their own head.
	classes := map[string]bool{}
	for _, sc := range rep.Scores {
		classes[sc.DeviceClass] = true
	}
	if !classes["cpu"] || !classes[lowHead] || len(classes) != 2 {
		t.Errorf("scores for device classes %v, want cpu and %s", slices.Sorted(maps.Keys(classes)), lowHead)
	}
}

// exportedModels exports each of rep's models and parses the file back,
// as prediction loads one: op → model.
func exportedModels(t *testing.T, rep *Report) map[string]*model.ONNXModel {
	t.Helper()
	out := map[string]*model.ONNXModel{}
	for op, g := range rep.Models {
		data, err := g.ExportONNX()
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.ParseONNX(op+".onnx", data)
		if err != nil {
			t.Fatal(err)
		}
		out[op] = m
	}
	return out
}

func headNames(hs []model.Head) []string {
	var n []string
	for _, h := range hs {
		n = append(n, h.Name)
	}
	return n
}

// labelTinySet labels the tiny set on the CPU and returns its rows and
// the labels file's directory, which the rows' tensor paths are relative to.
func labelTinySet(t *testing.T) ([]LabelRow, string) {
	t.Helper()
	dir := tinySet(t)
	out := filepath.Join(filepath.Dir(dir), "labels.jsonl")
	if _, err := Label(context.Background(), dir, out, cpuOptions()); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadLabels(out)
	if err != nil {
		t.Fatal(err)
	}
	return rows, filepath.Dir(out)
}

// recordStages sets o.Progress to note each stage Fit reports, once per
// run of reports, in order.
func recordStages(o *FitOptions) *[]string {
	stages := new([]string)
	o.Progress = func(p FitProgress) {
		if n := len(*stages); n == 0 || (*stages)[n-1] != p.Stage {
			*stages = append(*stages, p.Stage)
		}
	}
	return stages
}

// TestFitPipeline runs the whole pipeline on the tiny set: label on the
// CPU, cross-validate and fit, export the models, load them back and
// evaluate them on the same labels.
func TestFitPipeline(t *testing.T) {
	start := time.Now()
	rows, labelsDir := labelTinySet(t)
	labelled := time.Since(start)
	o := FitOptions{Dir: labelsDir, Folds: 2, Seed: 3, Model: model.DefaultFitOptions}
	o.Model.Epochs = 6
	stages := recordStages(&o)
	rep, err := Fit(rows, o)
	if err != nil {
		t.Fatal(err)
	}
	fitted := time.Since(start) - labelled
	// The same rows and seed give the same report, baselines included,
	// and the same weights.
	again, err := Fit(rows, FitOptions{Dir: o.Dir, Folds: 2, Seed: 3, Model: o.Model})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rep.Scores {
		if i >= len(again.Scores) || !reflect.DeepEqual(again.Scores[i], rep.Scores[i]) {
			t.Errorf("Fit is not deterministic for a seed: score %d %+v, then %+v", i, rep.Scores[i], again.Scores[min(i, len(again.Scores)-1)])
		}
	}
	for op, m := range rep.Models {
		if !slices.Equal(again.Models[op].Params, m.Params) {
			t.Errorf("Fit is not deterministic for a seed: %s weights differ", op)
		}
		// The labels were measured here, on the CPU: the model says with
		// which inner loops.
		if want := []string{kernels.InnerLoops()}; !slices.Equal(m.CPUInnerLoops, want) {
			t.Errorf("%s model: cpu inner loops %v, want %v", op, m.CPUInnerLoops, want)
		}
		// and on which processor, by model name and family number.
		host := hetero.NewCPU(0).Info()
		if want := []string{model.Processor(host.Model, host.Family)}; rows[0].DeviceModel == "" || rows[0].DeviceFamily != host.Family || !slices.Equal(m.CPUModels["cpu"], want) {
			t.Errorf("%s model: cpu models %v, want %v", op, m.CPUModels, want)
		}
		// and at which rank.
		if want := []int{rows[0].Rank}; rows[0].Rank < 1 || !slices.Equal(m.LabelRanks["cpu"], want) || len(m.LabelRanks) != 1 {
			t.Errorf("%s model: label ranks %v, want %v for the cpu head", op, m.LabelRanks, want)
		}
	}
	if !slices.Equal(*stages, []string{"features", "fold", "trees", "final"}) {
		t.Errorf("progress stages %v", *stages)
	}
	if rep.Tensors != 3 || rep.Sources != 2 || len(rep.Rows) != len(rows) || len(rep.Models) != 2 || len(rep.Curves) != 2 {
		t.Fatalf("report: %d tensors, %d sources, %d rows of %d, %d models, %d curves", rep.Tensors, rep.Sources, len(rep.Rows), len(rows), len(rep.Models), len(rep.Curves))
	}
	for _, c := range rep.Curves {
		if len(c.TrainLoss) == 0 || len(c.TrainAcc) != len(c.TrainLoss) || c.BestEpoch < 1 {
			t.Errorf("curve %+v", c)
		}
	}
	have := map[string]bool{}
	for _, s := range rep.Scores {
		have[s.Predictor] = true
		if s.N < 1 || s.OracleRatio <= 0 || s.OracleRatio > 1 || s.Accuracy > s.TieAccuracy || s.DeviceClass != "cpu" {
			t.Errorf("score %+v", s)
		}
	}
	for _, p := range append([]string{PredictorGCN, PredictorBoosted, PredictorBlend, PredictorDefault, PredictorRule, "always coo", "always csf", PredictorMeasure}, model.BaselineMethods()...) {
		if !have[p] {
			t.Errorf("no score for %s: %+v", p, rep.Scores)
		}
	}
	// The exported models score the same rows through the ONNX runtime,
	// on inputs computed as prediction computes them.
	var models []*model.ONNXModel
	for op, m := range exportedModels(t, rep) {
		if m.Info.HeadIndex("cpu") < 0 {
			t.Fatalf("%s: heads %v", op, m.Info.Heads)
		}
		models = append(models, m)
	}
	ev, err := Evaluate(rows, models, FitOptions{Dir: labelsDir, Folds: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	gcn := ev.Picks[0]
	if gcn.Predictor != PredictorGCN || slices.Contains(gcn.Formats, "") {
		t.Fatalf("evaluate: gcn picks %+v", gcn)
	}
	// The default is always reported, rule heads or none: the rule's
	// choice on a rule head's rows, the network's on the others.
	def := ev.Picks[1]
	if def.Predictor != PredictorDefault || len(def.Formats) != len(rows) {
		t.Fatalf("evaluate: the second picks are %s of %d rows, want %s of %d", def.Predictor, len(def.Formats), PredictorDefault, len(rows))
	}
	// A tree head's rows get the trees' pick; the trees are there for
	// exactly the heads the report names.
	for op, g := range rep.Models {
		if got, want := slices.Sorted(maps.Keys(g.Trees)), rep.TreeHeads[op]; !slices.Equal(got, want) {
			t.Errorf("%s model: trees for %v, tree heads %v", op, got, want)
		}
	}
	for i, r := range rows {
		want := gcn.Formats[i]
		for _, m := range models {
			if m.Info.Op != r.Op {
				continue
			}
			if slices.Contains(m.Info.RuleHeads, "cpu") {
				op, _ := hetero.ParseOp(r.Op)
				want = model.RuleChoice(op, hetero.CPU)
			}
			if slices.Contains(m.Info.TreeHeads, "cpu") {
				k := slices.IndexFunc(ev.Picks, func(p Picks) bool { return p.Predictor == PredictorBoosted })
				if k < 0 || ev.Picks[k].Formats[i] == "" {
					t.Fatalf("row %d (%s): a tree head, but no boosted pick", i+1, r.Op)
				}
				want = ev.Picks[k].Formats[i]
				// Under a blend margin, where the trees are unsure, the
				// blend's pick.
				if b := slices.IndexFunc(ev.Picks, func(p Picks) bool { return p.Predictor == PredictorBlend }); m.Info.BlendMargins["cpu"] > 0 && b >= 0 && def.Formats[i] == ev.Picks[b].Formats[i] {
					want = def.Formats[i]
				}
			}
		}
		if def.Formats[i] != want {
			t.Errorf("row %d (%s): default %s, want %s", i+1, r.Op, def.Formats[i], want)
		}
	}
	// tune-model's choice on evaluated rows: only heads whose models have
	// trees, a margin only for such a head, none from a Fit report.
	heads, margins := ev.ChooseTrees(nil)
	for op, hs := range heads {
		for _, h := range hs {
			if rep.Models[op].Trees[h] == nil {
				t.Errorf("ChooseTrees: %s head %s has no trees", op, h)
			}
		}
		for h := range margins[op] {
			if !slices.Contains(hs, h) {
				t.Errorf("ChooseTrees: a margin for %s head %s, which does not answer with trees", op, h)
			}
		}
	}
	if h, m := rep.ChooseTrees(nil); h != nil || m != nil {
		t.Errorf("ChooseTrees of a Fit report: %v, %v", h, m)
	}
	// Rows of a class the models have no head for get no gcn pick, and a
	// warning: never another class's head.
	other := slices.Clone(rows)
	for i := range other {
		other[i].Device, other[i].DeviceClass = "opencl:0", "opencl-cpu"
	}
	var warned []string
	ev2, err := Evaluate(other, models, FitOptions{Dir: labelsDir, Folds: 1, Warn: func(s string) { warned = append(warned, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if ev2.Picks[0].Predictor != PredictorGCN || slices.ContainsFunc(ev2.Picks[0].Formats, func(f string) bool { return f != "" }) ||
		len(warned) != 2 || !strings.Contains(warned[0], "has no head for device class opencl-cpu: 10 rows have no gcn score") {
		t.Errorf("another class: picks %v, warnings %q", ev2.Picks[0].Formats, warned)
	}
	// The picks agree with the Go model's, which saw the same inputs.
	x, err := formats.ReadFile(filepath.Join(labelsDir, filepath.FromSlash(rows[0].Tensor)))
	if err != nil {
		t.Fatal(err)
	}
	op, _ := hetero.ParseOp(rows[0].Op)
	var m *model.ONNXModel
	for _, mm := range models {
		if mm.Info.Op == rows[0].Op {
			m = mm
		}
	}
	pr, err := model.GCNPredictor{Model: m, Class: "cpu"}.Predict(x, op, rows[0].Mode-1, hetero.CPU)
	if err != nil {
		t.Fatal(err)
	}
	// Prediction answers what the evaluation's default does (checked
	// above: the rule's choice for a head that defers to it, else the
	// network's).
	if want := def.Formats[0]; pr.Best() != want {
		t.Errorf("row 1: predict says %s, evaluate %s (rule heads %v)", pr.Best(), want, m.Info.RuleHeads)
	}
	// The same rows as if measured on an AMD processor, again on one
	// with other inner loops, and again on an Intel processor with this
	// one's: three kinds of hardware, a cpu head named by inner loops and
	// family for each, a score for each, each head recording its
	// processor, and each kind's rows evaluated with its own head.
	const amd, intel = "AMD EPYC 9B14", "Intel(R) Xeon(R) Platinum 8481C"
	var thrice []LabelRow
	for _, hw := range []struct{ loops, processor string }{{kernels.InnerLoops(), amd}, {"elsewhere", amd}, {kernels.InnerLoops(), intel}} {
		for _, r := range rows {
			r.Build.InnerLoops, r.DeviceModel, r.DeviceFamily = hw.loops, hw.processor, 0
			thrice = append(thrice, r)
		}
	}
	o2 := FitOptions{Dir: o.Dir, Folds: 2, Seed: 3, Model: o.Model}
	split, err := Fit(thrice, o2)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{model.CPUHead("elsewhere", "amd"), model.CPUHead(kernels.InnerLoops(), "amd"), model.CPUHead(kernels.InnerLoops(), "intel")}
	slices.Sort(kinds)
	for op, g := range split.Models {
		if names := gcnHeads(g); !slices.Equal(names, kinds) {
			t.Errorf("%s model of three CPUs' labels: heads %v, want %v", op, names, kinds)
		}
		if got := g.CPUModels[model.CPUHead(kernels.InnerLoops(), "intel")]; !slices.Equal(got, []string{intel}) {
			t.Errorf("%s model: the intel head's processors %v", op, got)
		}
	}
	// Rows of one model name and two family numbers, and rows that
	// recorded none: a head for each, the family-numbered one recording
	// its processor by model name and number.
	var gens []LabelRow
	for _, family := range []int{0x19, 0x1a, 0} {
		for _, r := range rows {
			r.Build.InnerLoops, r.DeviceModel, r.DeviceFamily = kernels.InnerLoops(), "AMD EPYC", family
			gens = append(gens, r)
		}
	}
	byGen, err := Fit(gens, FitOptions{Dir: o.Dir, Folds: 1, Seed: 3, Model: o.Model})
	if err != nil {
		t.Fatal(err)
	}
	genHeads := []string{model.CPUHead(kernels.InnerLoops(), "amd"), model.CPUHead(kernels.InnerLoops(), "amd-19h"), model.CPUHead(kernels.InnerLoops(), "amd-1ah")}
	for op, g := range byGen.Models {
		if names := gcnHeads(g); !slices.Equal(names, genHeads) {
			t.Errorf("%s model of two generations' labels and unnumbered ones: heads %v, want %v", op, names, genHeads)
		}
		if got := g.CPUModels[genHeads[1]]; !slices.Equal(got, []string{"AMD EPYC (family 19h)"}) {
			t.Errorf("%s model: the amd-19h head's processors %v", op, got)
		}
	}
	classes := map[string]bool{}
	for _, s := range split.Scores {
		classes[s.DeviceClass] = true
	}
	if len(classes) != 3 || !classes[kinds[0]] || !classes[kinds[1]] || !classes[kinds[2]] {
		t.Errorf("scores of three CPUs' labels by class %v, want %v", classes, kinds)
	}
	plots, err := WritePlots(filepath.Join(t.TempDir(), "plots"), rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(plots) != 5 { // two curves, two confusion matrices, the ratio by size
		t.Errorf("plots %v", plots)
	}
	for _, p := range plots {
		if b, err := os.ReadFile(p); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%v)", p, err)
		}
	}
	t.Logf("%d rows: gen+label %v, fit (2 folds + final, %d epochs) %v, fit again + evaluate + plots %v", len(rows), labelled.Round(time.Millisecond),
		o.Model.Epochs, fitted.Round(time.Millisecond), (time.Since(start) - labelled - fitted).Round(time.Millisecond))
}

// gcnHeads returns the names of g's heads, in order.
func gcnHeads(g *model.GCN) []string {
	var names []string
	for _, h := range g.Config.Heads {
		names = append(names, h.Name)
	}
	return names
}

// TestHeads: one head per device class of an op, ranking only the formats
// that class's rows timed.
func TestHeads(t *testing.T) {
	a, b, c := validRow(), validRow(), validRow()
	b.Device, b.DeviceClass = "cpu", "cpu"
	b.Times = map[string]float64{"coo": 1, "csf": 2, "hicoo": 3, "alto": 4}
	c.Op = "ttm"
	d := &dataset{rows: []LabelRow{a, b, c}}
	hs := d.heads(hetero.MTTKRP)
	if len(hs) != 2 || hs[0].Name != "cpu" || !slices.Equal(hs[0].Classes, []string{"coo", "csf", "hicoo", "alto"}) ||
		hs[1].Name != "opencl-cpu" || !slices.Equal(hs[1].Classes, []string{"coo", "csf", "alto"}) {
		t.Errorf("mttkrp heads %+v", hs)
	}
}

// TestSplitTargets: PoCL rows of two processors get a head each; of one,
// they keep their class unless the model tuned has heads per processor.
func TestSplitTargets(t *testing.T) {
	const skylake, haswell = "pthread-skylake-avx512-AMD EPYC [CPU]", "pthread-haswell-AMD EPYC [CPU]"
	row := func(class, model string) LabelRow {
		r := validRow()
		r.DeviceClass, r.DeviceModel = class, model
		return r
	}
	classes := func(rows []LabelRow) []string {
		var c []string
		for _, r := range rows {
			c = append(c, r.DeviceClass)
		}
		return c
	}
	two := []LabelRow{row("opencl-cpu", skylake), row("opencl-cpu", haswell), row("opencl-cpu", "pthread"), row("cpu", "AMD EPYC"), row("cuda-gpu", "NVIDIA H200")}
	split := splitTargets(two, nil)
	if want := []string{"opencl-cpu/skylake-avx512", "opencl-cpu/haswell", "opencl-cpu", "cpu", "cuda-gpu"}; !slices.Equal(classes(two), want) {
		t.Errorf("two processors: classes %v, want %v", classes(two), want)
	}
	if want := map[string][]string{"opencl-cpu": {"opencl-cpu/haswell", "opencl-cpu/skylake-avx512"}}; !reflect.DeepEqual(split, want) {
		t.Errorf("two processors: split %v, want %v", split, want)
	}
	one := []LabelRow{row("opencl-cpu", skylake), row("opencl-cpu", skylake)}
	if split := splitTargets(one, nil); len(split) != 0 || !slices.Equal(classes(one), []string{"opencl-cpu", "opencl-cpu"}) {
		t.Errorf("one processor: classes %v, split %v; want them kept", classes(one), split)
	}
	init := map[string]*model.GCN{"mttkrp": {Config: model.Config{Heads: []model.Head{{Name: "cpu"}, {Name: "opencl-cpu/haswell"}}}}}
	if split := splitTargets(one, init); len(split) != 1 || !slices.Equal(classes(one), []string{"opencl-cpu/skylake-avx512", "opencl-cpu/skylake-avx512"}) {
		t.Errorf("one processor, tuning a model with heads per processor: classes %v, split %v", classes(one), split)
	}
}

// TestRuleHeads: a head defers to the rule unless the network's oracle
// ratio leads the rule's by RuleMargin or more, whatever their
// accuracies.
func TestRuleHeads(t *testing.T) {
	sc := func(op, class, pred string, acc, oracle float64) Score {
		return Score{Op: op, DeviceClass: class, Predictor: pred, N: 10, Accuracy: acc, OracleRatio: oracle}
	}
	scores := []Score{
		sc("ttm", "cpu", PredictorGCN, 0.827, 0.946), sc("ttm", "cpu", PredictorRule, 0.832, 0.948), // rule ahead
		sc("ttm", "cuda-gpu", PredictorGCN, 0.649, 0.988), sc("ttm", "cuda-gpu", PredictorRule, 0.619, 0.975), // the network faster
		sc("ttm", "opencl-cpu", PredictorGCN, 0.912, 0.9834), sc("ttm", "opencl-cpu", PredictorRule, 0.905, 0.9829), // more accurate, no faster
		sc("ttm", "opencl-gpu", PredictorGCN, 0.586, 0.926), sc("ttm", "opencl-gpu", PredictorRule, 0.584, 0.9211), // a lead under the margin
		sc("mttkrp", "cpu", PredictorGCN, 0.70, 0.93), sc("mttkrp", "cpu", PredictorRule, 0.71, 0.93), // tie, rule more accurate
		sc("mttkrp", "opencl-cpu", PredictorGCN, 0.71, 0.93), sc("mttkrp", "opencl-cpu", PredictorRule, 0.71, 0.93), // full tie: the free rule
		sc("mttkrp", "opencl-gpu", PredictorGCN, 0.60, 0.93), sc("mttkrp", "opencl-gpu", PredictorRule, 0.71, 0.92), // less accurate, faster picks
		sc("mttkrp", "cuda-gpu", PredictorGCN, 0.9, 0.98), sc("mttkrp", "cuda-gpu", "tree", 0.95, 0.99), // only a baseline ahead
	}
	got := RuleHeads(scores)
	want := map[string][]string{"ttm": {"cpu", "opencl-cpu", "opencl-gpu"}, "mttkrp": {"cpu", "opencl-cpu"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RuleHeads = %v, want %v", got, want)
	}
}

func TestSoftTarget(t *testing.T) {
	classes := []string{"coo", "csf", "alto", "hicoo"}
	for _, c := range []struct {
		name  string
		times map[string]float64
		temp  float64
		want  []float64 // nil: no target
	}{
		{"hard labels", map[string]float64{"coo": 1, "csf": 2}, 0, nil},
		{"nothing timed", map[string]float64{"other": 1}, 0.05, nil},
		// Equal times share the weight; untimed formats get none.
		{"tie", map[string]float64{"coo": 1, "csf": 1}, 0.05, []float64{0.5, 0.5, 0, 0}},
		// e^0.05 (5.1%) slower at temperature 0.05 weighs 1/e of the best.
		{"near tie", map[string]float64{"coo": math.Exp(0.05), "alto": 1}, 0.05, []float64{1 / (1 + math.E), 0, math.E / (1 + math.E), 0}},
		// Twice slower at 0.05 weighs e^-13.9: next to nothing.
		{"far", map[string]float64{"hicoo": 1, "csf": 2}, 0.05, []float64{0, math.Exp(-math.Log(2)/0.05) / (1 + math.Exp(-math.Log(2)/0.05)), 0, 1 / (1 + math.Exp(-math.Log(2)/0.05))}},
	} {
		got := softTarget(classes, c.times, c.temp)
		if (got == nil) != (c.want == nil) {
			t.Fatalf("%s: target %v, want %v", c.name, got, c.want)
		}
		for i := range c.want {
			if math.Abs(got[i]-c.want[i]) > 1e-12 {
				t.Fatalf("%s: target %v, want %v", c.name, got, c.want)
			}
		}
	}
}

// TestFitRefit: with Refit, the final network is trained again on every
// row, the validation part too, for the epochs early stopping chose.
func TestFitRefit(t *testing.T) {
	rows, labelsDir := labelTinySet(t)
	// Early stopping's validation part is a group of sources, and needs
	// three or more: the rows again under more source names.
	var many []LabelRow
	for _, src := range []string{"a", "b", "c", "d"} {
		for _, r := range rows {
			r.Source = src + r.Source
			many = append(many, r)
		}
	}
	fit := func(refit bool) (*Report, []string) {
		o := FitOptions{Dir: labelsDir, Folds: 1, Seed: 5, Model: model.DefaultFitOptions, Refit: refit}
		o.Model.Epochs = 4
		stages := recordStages(&o)
		rep, err := Fit(many, o)
		if err != nil {
			t.Fatal(err)
		}
		return rep, *stages
	}
	plain, _ := fit(false)
	rep, stages := fit(true)
	if !slices.Contains(stages, "final refit") {
		t.Errorf("progress stages %v, want a final refit", stages)
	}
	for i, c := range rep.Curves {
		if c.ValExamples == 0 || c.RefitExamples != c.TrainExamples+c.ValExamples || c.RefitEpoch < 1 || c.RefitEpoch > c.BestEpoch {
			t.Errorf("%s: %d training, %d validation examples, best epoch %d; refit on %d, epoch %d", c.Op, c.TrainExamples, c.ValExamples, c.BestEpoch, c.RefitExamples, c.RefitEpoch)
		}
		if p := plain.Curves[i]; p.RefitExamples != 0 || p.BestEpoch != c.BestEpoch {
			t.Errorf("%s without refit: refit on %d, best epoch %d (with: %d)", p.Op, p.RefitExamples, p.BestEpoch, c.BestEpoch)
		}
	}
	for op, g := range rep.Models {
		if slices.Equal(g.Params, plain.Models[op].Params) {
			t.Errorf("%s: the refit left the weights as they were", op)
		}
		if _, err := g.ExportONNX(); err != nil {
			t.Errorf("%s: %v", op, err)
		}
	}
}

// TestChooseTrees: from out-of-fold probabilities, a head answers with
// the trees under the smallest blend margin that scores best (the trees
// unsure and wrong where the network is right: the blend mends them), a
// head whose trees and blend are both behind the network keeps the
// network, and a rule head gets no trees.
func TestChooseTrees(t *testing.T) {
	var d dataset
	var network, trees [][]float64
	add := func(class string, label int, np, tp []float64) {
		names := []string{"coo", "csf"}
		d.rows = append(d.rows, LabelRow{Tensor: fmt.Sprintf("t%d", len(d.rows)), Source: "s", Op: "mttkrp", Mode: 1, DeviceClass: class,
			Label: names[label], Times: map[string]float64{names[label]: 1, names[1-label]: 2}})
		network, trees = append(network, np), append(trees, tp)
	}
	for i := range 20 {
		label := i % 2
		right := func(p float64) []float64 { // p on the label
			if label == 0 {
				return []float64{p, 1 - p}
			}
			return []float64{1 - p, p}
		}
		switch {
		case i < 5: // the network wrong, the trees sure and right
			add("cpu", label, right(0.3), right(0.8))
		case i < 10: // both right
			add("cpu", label, right(0.9), right(0.8))
		default: // the trees unsure and wrong, the network sure and right
			add("cpu", label, right(0.9), right(0.48))
		}
		add("gpu", label, right(0.9), right(0.05)) // trees sure and wrong
		add("opencl-cpu", label, right(0.9), right(0.9))
	}
	gcn := Picks{Predictor: PredictorGCN, Formats: make([]string, len(d.rows))}
	for i := range d.rows {
		gcn.Formats[i] = []string{"coo", "csf"}[argmax(network[i])]
	}
	scores := Scores(d.rows, []Picks{gcn})
	heads, margins := d.chooseTrees(scores, map[string][]string{"mttkrp": {"opencl-cpu"}}, network, trees)
	if want := map[string][]string{"mttkrp": {"cpu"}}; !reflect.DeepEqual(heads, want) {
		t.Errorf("tree heads %v, want %v", heads, want)
	}
	// The trees lead by 0.04 where they are wrong: 0.05 is the smallest
	// margin that sends those rows to the blend.
	if want := map[string]map[string]float64{"mttkrp": {"cpu": 0.05}}; !reflect.DeepEqual(margins, want) {
		t.Errorf("blend margins %v, want %v", margins, want)
	}
}

// TestChooseTreesSlack: a larger blend margin that mends one row in 400
// (0.0025 of accuracy, less than blendSlack) is not worth asking the
// network more often: the head answers with the trees alone. With the
// slack at zero it takes the margin that mends the row.
func TestChooseTreesSlack(t *testing.T) {
	var d dataset
	var network, trees [][]float64
	for i := range 400 {
		label := i % 2
		names := []string{"coo", "csf"}
		d.rows = append(d.rows, LabelRow{Tensor: fmt.Sprintf("t%d", i), Source: "s", Op: "mttkrp", Mode: 1, DeviceClass: "cpu",
			Label: names[label], Times: map[string]float64{names[label]: 1, names[1-label]: 1.2}})
		right := func(p float64) []float64 {
			if label == 0 {
				return []float64{p, 1 - p}
			}
			return []float64{1 - p, p}
		}
		switch {
		case i < 10: // the network wrong, the trees sure and right
			network, trees = append(network, right(0.3)), append(trees, right(0.8))
		case i == 10: // the trees wrong by a lead of 0.3, the network sure and right
			network, trees = append(network, right(0.95)), append(trees, right(0.35))
		default:
			network, trees = append(network, right(0.9)), append(trees, right(0.8))
		}
	}
	gcn := Picks{Predictor: PredictorGCN, Formats: make([]string, len(d.rows))}
	for i := range d.rows {
		gcn.Formats[i] = []string{"coo", "csf"}[argmax(network[i])]
	}
	scores := Scores(d.rows, []Picks{gcn})
	heads, margins := d.chooseTrees(scores, nil, network, trees)
	if want := map[string][]string{"mttkrp": {"cpu"}}; !reflect.DeepEqual(heads, want) {
		t.Errorf("tree heads %v, want %v", heads, want)
	}
	if len(margins) != 0 {
		t.Errorf("blend margins %v, want none (the trees alone)", margins)
	}
	// The blend mends the row only where the margin exceeds the trees'
	// lead of 0.3 and the mean of the two favours the network.
	saved := blendSlack
	blendSlack = 0
	defer func() { blendSlack = saved }()
	_, margins = d.chooseTrees(scores, nil, network, trees)
	if m := margins["mttkrp"]["cpu"]; m <= 0.3 {
		t.Errorf("with no slack: blend margin %v, want above 0.3", m)
	}
}
