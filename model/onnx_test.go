package model

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/graphenc"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/kernels"
	"github.com/sparsetune/sparsetune/model/onnxpb"
)

// randomGCN returns a default-architecture GCN with two heads, weights
// jittered so no bias is zero, and a non-trivial standardisation.
func randomGCN(t testing.TB, seed uint64) *GCN {
	rng := rand.New(rand.NewPCG(seed, seed))
	g, err := NewGCN(DefaultConfig("ttm", Head{"cpu", []string{"coo", "csr", "ell", "hyb"}}, Head{"gpu", []string{"coo", "csr", "ell", "hyb"}}), rng)
	if err != nil {
		t.Fatal(err)
	}
	for i := range g.Params {
		g.Params[i] += 0.05 * rng.NormFloat64()
	}
	for i := range features.Count {
		g.Mean[i], g.Std[i] = rng.NormFloat64(), 0.5+rng.Float64()
	}
	return g
}

// exportParsed exports g and parses the file back, as a model file is
// read (name is its path in messages).
func exportParsed(tb testing.TB, g *GCN, name string) *ONNXModel {
	tb.Helper()
	data, err := g.ExportONNX()
	if err != nil {
		tb.Fatal(err)
	}
	m, err := ParseONNX(name, data)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// TestONNXParity: each runtime running the exported file gives the Go
// forward pass's probabilities within 1e-4 on 100 random inputs.
func TestONNXParity(t *testing.T) {
	for _, rt := range Runtimes {
		t.Run(rt, func(t *testing.T) { testParity(t, rt) })
	}
}

func testParity(t *testing.T, runtime string) {
	g := randomGCN(t, 11)
	m := exportParsed(t, g, "random.onnx")
	if err := m.UseRuntime(runtime); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(12, 12))
	p := g.newPass()
	worst := 0.0
	n := 100
	if testing.Short() {
		n = 20
	}
	for range n {
		in := randomInput(g.Config, rng)
		got, err := m.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		g.forward(p, in)
		for k := range p.hs {
			// One head alone, as predictions run it.
			one, err := m.RunHead(in, k)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range p.hs[k].probs {
				worst = max(worst, math.Abs(got[k][i]-want), math.Abs(one[i]-want))
			}
		}
	}
	if _, err := m.RunHead(randomInput(g.Config, rng), len(p.hs)); err == nil {
		t.Errorf("RunHead of a head beyond the model's: no error")
	}
	t.Logf("%d inputs, largest probability difference %.2g", n, worst)
	if worst > 1e-4 {
		t.Errorf("%s differs from the Go forward by %.3g, want <= 1e-4", runtime, worst)
	}
}

// editModel returns data edited as a ModelProto: files that are valid
// protobuf but not valid models. The edited file has no checksum (as one
// of an older build), so the edit, not the checksum, is what loading
// must report.
func editModel(t testing.TB, data []byte, edit func(*onnxpb.ModelProto)) []byte {
	t.Helper()
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(data, &mp); err != nil {
		t.Fatal(err)
	}
	setMeta(metaChecksum, "")(&mp)
	// The packed trees say where in the file they lie, which a file
	// written again by protobuf may change: an edited file has none, as
	// one of a build before them (TestPackedTreesWhereTheySay).
	setMeta(metaPackedTrees, "")(&mp)
	mp.Graph.Initializer = slices.DeleteFunc(mp.Graph.Initializer, func(t *onnxpb.TensorProto) bool {
		return strings.HasPrefix(t.GetName(), packedTreesPrefix)
	})
	edit(&mp)
	out, err := proto.Marshal(&mp)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// flipWeight returns data with one bit of a weight flipped, the damage
// no check of a file's structure can see: a zero weight of the packed
// initializers becomes the smallest float32.
func flipWeight(t *testing.T, data []byte) []byte {
	t.Helper()
	i := bytes.Index(data, make([]byte, 64))
	if i < 0 {
		t.Fatal("no run of zero weights to damage")
	}
	out := slices.Clone(data)
	out[i+32] ^= 1
	return out
}

// appendMeta returns data with one more metadata entry at its end.
func appendMeta(data []byte, key, value string) []byte {
	var e []byte
	e = protowire.AppendTag(e, fieldStringEntryKey, protowire.BytesType)
	e = protowire.AppendString(e, key)
	e = protowire.AppendTag(e, fieldStringEntryVal, protowire.BytesType)
	e = protowire.AppendString(e, value)
	out := protowire.AppendTag(slices.Clone(data), fieldModelMetadata, protowire.BytesType)
	return protowire.AppendBytes(out, e)
}

func setMeta(key, value string) func(*onnxpb.ModelProto) {
	return func(mp *onnxpb.ModelProto) {
		var props []*onnxpb.StringStringEntryProto
		for _, p := range mp.MetadataProps {
			if p.GetKey() == key {
				if value == "" {
					continue
				}
				p.Value = proto.String(value)
			}
			props = append(props, p)
		}
		mp.MetadataProps = props
	}
}

// TestONNXErrors: every broken file gives one error naming the file and
// the problem, never a panic.
func TestONNXErrors(t *testing.T) {
	g := randomGCN(t, 13)
	g.Config.Budget = graphenc.Budget{Rows: 8, Cols: 6}
	_, _, n := g.Config.views(nil)
	g.Params = make([]float64, n)
	data, err := g.ExportONNX()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "not an ONNX model: no graph"},
		{"garbage", []byte("\xff\xff\xff\xff not a protobuf"), "not an ONNX protobuf"},
		{"truncated", data[:len(data)/2], "not an ONNX protobuf"},
		{"no-op", editModel(t, data, setMeta(metaOp, "")), "missing metadata sparsetune.op"},
		{"version", editModel(t, data, setMeta(metaVersion, "2")), `model format version "2", this build reads version 1`},
		{"budget", editModel(t, data, setMeta(metaBudget, "9x6")), "input adj has shape [8 6], expected [9 6]"},
		{"features", editModel(t, data, setMeta(metaFeatures, "order,log_nnz")), "differ from this build's"},
		{"classes", editModel(t, data, setMeta(metaClasses+"gpu", "coo,csr")), "expected \"probs_gpu\" of shape [1 2]"},
		{"mean", editModel(t, data, setMeta(metaMean, "x")), "sparsetune.feature_mean has 1 values"},
		{"no-graph", editModel(t, data, func(mp *onnxpb.ModelProto) { mp.Graph = nil }), "no graph"},
		{"inputs", editModel(t, data, func(mp *onnxpb.ModelProto) { mp.Graph.Input = mp.Graph.Input[1:] }), "graph has 5 inputs"},
		{"operator", editModel(t, data, func(mp *onnxpb.ModelProto) { mp.Graph.Node[3].OpType = proto.String("NoSuchOp") }), "operator NoSuchOp is not one the builtin runtime runs"},
		{"revision-newer", editModel(t, data, setMeta(metaFeatureRevision, "99")), "features of revision 99, and this build computes revision"},
		{"revision-bad", editModel(t, data, setMeta(metaFeatureRevision, "two")), `sparsetune.feature_revision: "two" is not a feature revision`},
		{"revision-old-mttkrp", editModel(t, editModel(t, data, setMeta(metaFeatureRevision, "")), setMeta(metaOp, "mttkrp")), "features of revision 1, whose MTTKRP fiber features describe other fibers"},
		{"checksum", flipWeight(t, data), "checksum mismatch"},
		{"checksum-not-last", appendMeta(data, "note", "after the checksum"), "is not the file's last field"},
		{"checksum-twice", seal(data), "is not the file's last field"},
		{"rule-heads", editModel(t, data, func(mp *onnxpb.ModelProto) {
			mp.MetadataProps = append(mp.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(metaRuleHeads), Value: proto.String("cpu,tpu")})
		}), `sparsetune.rule_heads names "tpu", which is not a head (cpu,gpu)`},
		{"label-ranks-head", appendLabelRanks(t, data, "tpu", "16"), `sparsetune.label_ranks.tpu: "tpu" is not a head (cpu,gpu)`},
		{"label-ranks-bad", appendLabelRanks(t, data, "cpu", "16,x"), `sparsetune.label_ranks.cpu: "x" is not a rank`},
		{"label-ranks-zero", appendLabelRanks(t, data, "cpu", "0"), `"0" is not a rank`},
		{"label-ranks-order", appendLabelRanks(t, data, "gpu", "64,16"), `ranks "64,16" are not in increasing order`},
	} {
		path := filepath.Join(t.TempDir(), tc.name+".onnx")
		if err := os.WriteFile(path, tc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadONNX(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "model "+path+": ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line starting with the path and containing %q", tc.name, err, tc.want)
		}
	}
	// SpTTM's features are the same in revisions 1 and 2: a model written
	// before files recorded the revision still loads.
	old := filepath.Join(t.TempDir(), "revision-1-ttm.onnx")
	if err := os.WriteFile(old, editModel(t, data, setMeta(metaFeatureRevision, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := LoadONNX(old); err != nil || m.Info.FeatureRevision != 1 {
		t.Errorf("SpTTM model without a feature revision: %v, want it loaded as revision 1", err)
	}
	// The exported file is sealed; the same file without its checksum,
	// as an older build wrote it, loads and reads every head at once.
	if m, err := ParseONNX("sealed.onnx", data); err != nil || !m.Info.Sealed {
		t.Errorf("exported file: sealed %v, %v; want a sealed file", m != nil && m.Info.Sealed, err)
	}
	if m, err := ParseONNX("unsealed.onnx", editModel(t, data, func(*onnxpb.ModelProto) {})); err != nil || m.Info.Sealed {
		t.Errorf("file without a checksum: sealed %v, %v; want it loaded, not sealed", m != nil && m.Info.Sealed, err)
	}
	if _, err := LoadONNX(filepath.Join(t.TempDir(), "missing.onnx")); err == nil || !strings.Contains(err.Error(), "missing.onnx") {
		t.Errorf("missing file: %v", err)
	}
}

// TestONNXConcurrent: callers sharing one loaded model get the results a
// single caller gets.
func TestONNXConcurrent(t *testing.T) {
	g := randomGCN(t, 14)
	g.Config.Budget = graphenc.Budget{Rows: 16, Cols: 16}
	_, _, n := g.Config.views(nil)
	g.Params = g.Params[:0]
	rng := rand.New(rand.NewPCG(15, 15))
	for range n {
		g.Params = append(g.Params, 0.1*rng.NormFloat64())
	}
	m := exportParsed(t, g, "concurrent.onnx")
	var err error
	inputs := make([]*Input, 24)
	want := make([][][]float64, len(inputs))
	for i := range inputs {
		inputs[i] = randomInput(g.Config, rng)
		if want[i], err = m.Run(inputs[i]); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 3 {
				for i := range inputs {
					j := (i + w + r) % len(inputs)
					got, err := m.Run(inputs[j])
					if err != nil {
						t.Error(err)
						return
					}
					for k := range got {
						if !slices.Equal(got[k], want[j][k]) {
							t.Errorf("worker %d: input %d head %d: %v, alone %v", w, j, k, got[k], want[j][k])
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestONNXChecker runs the ONNX project's own checker on exported files,
// a network alone and one with trees for a head (the ai.onnx.ml
// TreeEnsembleClassifier node and its outputs), when Debian's
// python3-onnx is installed (CI installs it and sets
// SPARSETUNE_ONNX_CHECKER=1 so that a missing checker fails).
func TestONNXChecker(t *testing.T) {
	const python = "/usr/bin/python3"
	probe := exec.Command(python, "-c", "import onnx")
	if err := probe.Run(); err != nil {
		if os.Getenv("SPARSETUNE_ONNX_CHECKER") == "1" {
			t.Fatalf("SPARSETUNE_ONNX_CHECKER=1 but %s cannot import onnx: %v (apt-get install python3-onnx)", python, err)
		}
		t.Skipf("%s cannot import onnx (%v): skipping the ONNX checker; apt-get install python3-onnx", python, err)
	}
	withTrees, _ := treesGCN(t, TreeOptions{Rounds: 20, Depth: 4})
	for _, c := range []struct {
		name string
		g    *GCN
	}{{"network", randomGCN(t, 16)}, {"trees", withTrees}} {
		t.Run(c.name, func(t *testing.T) {
			data, err := c.g.ExportONNX()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "model.onnx")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(python, "-c", `import onnx, sys
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
print("ok", m.ir_version, m.opset_import[0].version, [n.op_type for n in m.graph.node if n.domain == "ai.onnx.ml"])`, path).CombinedOutput()
			if err != nil {
				t.Fatalf("onnx.checker rejects the export: %v\n%s", err, out)
			}
			t.Logf("onnx.checker: %s", strings.TrimSpace(string(out)))
		})
	}
}

// BenchmarkPredictLatency times what a prediction costs on a generated
// 1M-nonzero tensor, from the sample to the answer, reporting the median
// and 99th percentile of the whole and the median of each step: with the
// network of the default architecture (global features, graph encoding,
// inference), and with boosted trees of the default options for the head
// (global features, trees).
func BenchmarkPredictLatency(b *testing.B) {
	rng := rand.New(rand.NewPCG(21, 22))
	x, _ := formats.NewCOO([]int{200000, 100000, 1000}, 1_000_000)
	idx := make([]uint32, 3)
	for range 1_000_000 {
		for m, d := range x.Dims {
			u := rng.Float64()
			idx[m] = uint32(u * u * float64(d))
		}
		x.Append(idx, 1)
	}
	network := randomGCN(b, 23)
	withTrees, _ := treesGCN(b, DefaultTreeOptions)
	// blend: the trees and the network always (an infinite blend margin),
	// the most a decision of a head with trees costs.
	blend, _ := treesGCN(b, DefaultTreeOptions)
	blend.BlendMargins = map[string]float64{"cpu": math.Inf(1)}
	for _, c := range []struct {
		name string
		g    *GCN
	}{{"network", network}, {"trees", withTrees}, {"blend", blend}} {
		b.Run(c.name, func(b *testing.B) {
			m := exportParsed(b, c.g, "latency.onnx")
			p := GCNPredictor{Model: m}
			var total, feat, enc, inf []time.Duration
			for b.Loop() {
				start := time.Now()
				pr, err := p.Predict(x, hetero.SpTTM, 1, hetero.CPU)
				if err != nil {
					b.Fatal(err)
				}
				total = append(total, time.Since(start))
				feat, enc, inf = append(feat, pr.Features), append(enc, pr.Encoding), append(inf, pr.Infer)
			}
			pct := func(d []time.Duration, q float64) float64 {
				s := slices.Clone(d)
				slices.Sort(s)
				return s[min(int(q*float64(len(s))), len(s)-1)].Seconds() * 1e3
			}
			b.ReportMetric(pct(total, 0.5), "p50-ms")
			b.ReportMetric(pct(total, 0.99), "p99-ms")
			b.ReportMetric(pct(feat, 0.5), "features-p50-ms")
			b.ReportMetric(pct(enc, 0.5), "encode-p50-ms")
			b.ReportMetric(pct(inf, 0.5), "inference-p50-ms")
		})
	}
}

// TestGCNPredictorClass: heads are per device class; a class without a
// head, or an accelerator with no class given, is an error that says so.
func TestGCNPredictorClass(t *testing.T) {
	m, err := LoadONNX(sanityFile)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	x := familyTensor(rng, 0)
	if _, err := (GCNPredictor{Model: m}).Predict(x, hetero.SpTTM, 0, hetero.CPU); err != nil {
		t.Fatalf("cpu head: %v", err)
	}
	if _, err := (GCNPredictor{Model: m, Class: "cpu"}).Predict(x, hetero.SpTTM, 0, hetero.CPU); err != nil {
		t.Fatalf("cpu class: %v", err)
	}
	_, err = GCNPredictor{Model: m, Class: "opencl-cpu"}.Predict(x, hetero.SpTTM, 0, hetero.GPU)
	if err == nil || !strings.Contains(err.Error(), "no head for device class opencl-cpu (heads: [cpu])") {
		t.Fatalf("opencl-cpu: %v", err)
	}
	_, err = GCNPredictor{Model: m}.Predict(x, hetero.SpTTM, 0, hetero.GPU)
	if err == nil || !strings.Contains(err.Error(), "needs its device class") {
		t.Fatalf("gpu without a class: %v", err)
	}
	s, err := features.Summarize(x)
	if err != nil {
		t.Fatal(err)
	}
	var dp DevicePredictor = GCNPredictor{Model: m}
	if _, err := dp.PredictDevice(s, hetero.SpTTM, 0, hetero.Info{Name: "cpu", Kind: hetero.CPU}); err != nil {
		t.Fatalf("PredictDevice on the CPU: %v", err)
	}
	_, err = dp.PredictDevice(s, hetero.SpTTM, 0, hetero.Info{Name: "cuda:0", Kind: hetero.GPU, Type: "gpu"})
	if err == nil || !strings.Contains(err.Error(), "no head for device class cuda-gpu") {
		t.Fatalf("PredictDevice on a GPU: %v", err)
	}
}

// TestRuleHeads: a head the model file marks as deferring to the rule
// answers with the rule's ranking (By "rule"), the other head with the
// network; the mark survives export and load, and naming no head of the
// model is refused at export.
func TestRuleHeads(t *testing.T) {
	g := randomGCN(t, 17)
	g.RuleHeads = []string{"nope"}
	if _, err := g.ExportONNX(); err == nil || !strings.Contains(err.Error(), `rule head "nope"`) {
		t.Fatalf("export with an unknown rule head: %v", err)
	}
	g.RuleHeads = []string{"cpu"}
	data, err := g.ExportONNX()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.onnx")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadONNX(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Info.RuleHeads, []string{"cpu"}) {
		t.Fatalf("loaded rule heads %v, want [cpu]", m.Info.RuleHeads)
	}
	s := familySummary(t)
	p := GCNPredictor{Model: m}
	pr, err := p.PredictDevice(s, hetero.SpTTM, 0, hetero.Info{Name: "cpu", Kind: hetero.CPU})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := RulePredictor{}.PredictSummary(s, hetero.SpTTM, 0, hetero.CPU)
	if err != nil {
		t.Fatal(err)
	}
	if pr.By != "rule" || pr.Best() != rule.Best() || pr.Infer != 0 {
		t.Errorf("rule head: by %q, best %s (rule %s), inference %v", pr.By, pr.Best(), rule.Best(), pr.Infer)
	}
	pr, err = p.PredictDevice(s, hetero.SpTTM, 0, hetero.Info{Name: "x:0", Kind: hetero.GPU, Type: "gpu"})
	if err == nil {
		t.Fatalf("class x-gpu has no head, got %v", pr)
	}
	p.Class = "gpu"
	if pr, err = p.PredictSummary(s, hetero.SpTTM, 0, hetero.GPU); err != nil || pr.By != "" || len(pr.Formats) != 4 {
		t.Errorf("network head: %+v, %v", pr, err)
	}
	// Without a summary: the rule head answers, the network head and
	// another op's question do not.
	var sf SummaryFreePredictor = GCNPredictor{Model: m}
	if pr, ok := sf.PredictWithoutSummary(hetero.SpTTM, 0, hetero.Info{Name: "cpu", Kind: hetero.CPU}); !ok || pr.By != "rule" || pr.Best() != RuleChoice(hetero.SpTTM, hetero.CPU) {
		t.Errorf("rule head without a summary: %v, %v", pr, ok)
	}
	if _, ok := sf.PredictWithoutSummary(hetero.SpTTM, 0, hetero.Info{Name: "g:0", Kind: hetero.GPU, Type: "gpu", Model: "x"}); ok {
		t.Error("a device of class g-gpu answered without a summary")
	}
	if _, ok := sf.PredictWithoutSummary(hetero.MTTKRP, 0, hetero.Info{Name: "cpu", Kind: hetero.CPU}); ok {
		t.Error("a ttm model answered for mttkrp")
	}
}

// TestGCNFromONNX: the network read back from a model file has the
// weights exported (within float32 rounding), the standardisation, the
// training range and the rule heads, so fine-tuning starts from the
// file's model; and a file missing an initializer is refused.
func TestGCNFromONNX(t *testing.T) {
	g := randomGCN(t, 19)
	g.RuleHeads = []string{"gpu"}
	for i := range features.Count {
		g.TrainMin[i], g.TrainMax[i] = -float64(i), float64(i)+1
	}
	data, err := g.ExportONNX()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseONNX("g.onnx", data)
	if err != nil {
		t.Fatal(err)
	}
	back, err := m.GCN()
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Params) != len(g.Params) {
		t.Fatalf("%d weights back, %d exported", len(back.Params), len(g.Params))
	}
	worst := 0.0
	for i, v := range g.Params {
		worst = max(worst, math.Abs(back.Params[i]-v)/max(math.Abs(v), 1e-3))
	}
	if worst > 1e-5 {
		t.Errorf("weights differ by up to %.2g relative, want float32 rounding", worst)
	}
	for i := range features.Count {
		if math.Abs(back.Mean[i]-g.Mean[i]) > 1e-6*max(1, math.Abs(g.Mean[i])) || math.Abs(back.Std[i]/g.Std[i]-1) > 1e-6 {
			t.Errorf("feature %d: mean %v std %v back, %v %v exported", i, back.Mean[i], back.Std[i], g.Mean[i], g.Std[i])
		}
	}
	if back.TrainMax != g.TrainMax || !slices.Equal(back.RuleHeads, g.RuleHeads) || !reflect.DeepEqual(back.Config, g.Config) {
		t.Errorf("config %+v, rule heads %v, train max %v: want the exported ones", back.Config, back.RuleHeads, back.TrainMax)
	}
	// Same predictions: the read-back network exports to the same file.
	m2 := exportParsed(t, back, "again.onnx")
	in := randomInput(g.Config, rand.New(rand.NewPCG(1, 2)))
	p1, err1 := m.Run(in)
	p2, err2 := m2.Run(in)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	for k := range p1 {
		for i := range p1[k] {
			if math.Abs(p1[k][i]-p2[k][i]) > 1e-5 {
				t.Errorf("head %d class %d: %v from the file, %v after a round trip", k, i, p1[k][i], p2[k][i])
			}
		}
	}
	broken := editModel(t, data, func(mp *onnxpb.ModelProto) { mp.Graph.Initializer = mp.Graph.Initializer[:3] })
	if mb, err := ParseONNX("broken.onnx", broken); err == nil {
		if _, err := mb.GCN(); err == nil || !strings.Contains(err.Error(), "no initializer") {
			t.Errorf("a file missing initializers: %v", err)
		}
	}
}

// TestStartFrom: a network with a subset of another's heads starts from
// its layers and those heads, and predicts what it predicts; another
// architecture copies nothing.
func TestStartFrom(t *testing.T) {
	src := randomGCN(t, 23)
	gpu := src.Config.Heads[1]
	dst, err := NewGCN(DefaultConfig("ttm", gpu, Head{"tpu", []string{"coo", "csr"}}), rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := dst.StartFrom(src); !slices.Equal(got, []string{"gpu"}) {
		t.Fatalf("copied heads %v, want [gpu]", got)
	}
	in := randomInput(src.Config, rand.New(rand.NewPCG(2, 2)))
	ps, pd := src.newPass(), dst.newPass()
	src.forward(ps, in)
	dst.forward(pd, in)
	for i, want := range ps.hs[1].probs {
		if math.Abs(pd.hs[0].probs[i]-want) > 1e-12 {
			t.Errorf("class %d: %v after StartFrom, %v in the source", i, pd.hs[0].probs[i], want)
		}
	}

	// A "cpu" head tuned on one kind of inner loops starts from the
	// source's cpu head of that kind and, with heads per processor
	// family, of its family.
	split := randomGCN(t, 24)
	cpu := split.Config.Heads[0]
	cpu.Name = "cpu"
	for _, c := range []struct {
		heads       [2]string
		loops, host string
		want        int
	}{
		{[2]string{CPUHead("avx2+pext", ""), CPUHead("avx512+pext", "")}, "avx2+pext", "", 0},
		{[2]string{CPUHead("avx2+pext", ""), CPUHead("avx512+pext", "")}, "avx512+pext", "", 1},
		{[2]string{CPUHead("avx512+pext", "amd"), CPUHead("avx512+pext", "intel")}, "avx512+pext", "AMD EPYC 9B14", 0},
		{[2]string{CPUHead("avx512+pext", "amd"), CPUHead("avx512+pext", "intel")}, "avx512+pext", "Intel(R) Xeon(R) Processor", 1},
	} {
		split.Config.Heads[0].Name, split.Config.Heads[1].Name = c.heads[0], c.heads[1]
		tuned, err := NewGCN(DefaultConfig("ttm", cpu), rand.New(rand.NewPCG(4, 4)))
		if err != nil {
			t.Fatal(err)
		}
		tuned.CPUInnerLoops = []string{c.loops}
		if c.host != "" {
			tuned.CPUModels = map[string][]string{"cpu": {c.host}}
		}
		if got := tuned.StartFrom(split); !slices.Equal(got, []string{"cpu"}) {
			t.Fatalf("%s on %q: copied heads %v, want [cpu]", c.loops, c.host, got)
		}
		ps, pd := split.newPass(), tuned.newPass()
		split.forward(ps, in)
		tuned.forward(pd, in)
		if !slices.Equal(pd.hs[0].probs, ps.hs[c.want].probs) {
			t.Errorf("%s on %q: the cpu head predicts %v, the source's %s head %v", c.loops, c.host, pd.hs[0].probs, c.heads[c.want], ps.hs[c.want].probs)
		}
	}

	other, err := NewGCN(Config{Op: "ttm", Budget: src.Config.Budget, Hidden: 8, MLP: [2]int{4, 4}, Heads: []Head{gpu}}, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		t.Fatal(err)
	}
	before := slices.Clone(other.Params)
	if got := other.StartFrom(src); got != nil || !slices.Equal(other.Params, before) {
		t.Errorf("another architecture: copied %v", got)
	}
}

// TestHardwareWarning: a model records the inner loops its cpu head's
// labels were measured with, and a cpu prediction on a machine whose
// kernels run other ones says so, by the network and by a rule head;
// other heads, and matching hardware, get no such warning.
func TestHardwareWarning(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	s, err := features.Summarize(familyTensor(rng, 1))
	if err != nil {
		t.Fatal(err)
	}
	cpu := hetero.Info{Name: "cpu", Kind: hetero.CPU}
	warned := func(pr *Prediction) bool {
		for _, w := range pr.Warnings {
			if strings.Contains(w, "inner loops") && strings.Contains(w, kernels.InnerLoops()) && strings.Contains(w, "tune-model") {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		loops     []string
		ruleHeads []string
		want      bool
	}{
		{[]string{"elsewhere"}, nil, true},
		{[]string{"elsewhere"}, []string{"cpu"}, true},
		{[]string{"elsewhere", kernels.InnerLoops()}, nil, false},
		{nil, nil, false}, // not recorded
	} {
		g := randomGCN(t, 23)
		g.CPUInnerLoops, g.RuleHeads = c.loops, c.ruleHeads
		m := exportParsed(t, g, "m.onnx")
		if !slices.Equal(m.Info.CPUInnerLoops, c.loops) {
			t.Fatalf("read back inner loops %v, want %v", m.Info.CPUInnerLoops, c.loops)
		}
		p := GCNPredictor{Model: m}
		pr, err := p.PredictDevice(s, hetero.SpTTM, 0, cpu)
		if err != nil {
			t.Fatal(err)
		}
		if warned(pr) != c.want {
			t.Errorf("loops %v, rule heads %v: cpu warnings %q, want the hardware warning: %v", c.loops, c.ruleHeads, pr.Warnings, c.want)
		}
		if pr, ok := p.PredictWithoutSummary(hetero.SpTTM, 0, cpu); ok && warned(pr) != c.want {
			t.Errorf("loops %v, rule heads %v, without a summary: warnings %q, want the hardware warning: %v", c.loops, c.ruleHeads, pr.Warnings, c.want)
		}
		gp := GCNPredictor{Model: m, Class: "gpu"}
		if pr, err := gp.PredictSummary(s, hetero.SpTTM, 0, hetero.GPU); err != nil {
			t.Errorf("gpu head: %v", err)
		} else if warned(pr) {
			t.Errorf("gpu head: warnings %q", pr.Warnings)
		}
		back, err := m.GCN()
		if err != nil || !slices.Equal(back.CPUInnerLoops, c.loops) {
			t.Errorf("GCN of the file: inner loops %v, %v", back.CPUInnerLoops, err)
		}
	}
}

// appendLabelRanks returns the model file data with metadata recording
// the label ranks value for head.
func appendLabelRanks(t *testing.T, data []byte, head, value string) []byte {
	return editModel(t, data, func(mp *onnxpb.ModelProto) {
		mp.MetadataProps = append(mp.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(metaLabelRanks + head), Value: proto.String(value)})
	})
}

// TestLabelRanks: a model file records the ranks each head's labels were
// timed at, a learnt prediction carries its head's (rank 16 for a head
// whose file records none, as every file did before), the rule's carries
// none, and RankNote speaks only far from them.
func TestLabelRanks(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 8))
	s, err := features.Summarize(familyTensor(rng, 1))
	if err != nil {
		t.Fatal(err)
	}
	cpu := hetero.Info{Name: "cpu", Kind: hetero.CPU}
	for _, c := range []struct {
		ranks     map[string][]int
		ruleHeads []string
		want      []int // the cpu prediction's LearntRanks
	}{
		{map[string][]int{"cpu": {64}, "gpu": {16}}, nil, []int{64}},
		{map[string][]int{"cpu": {8, 32}}, nil, []int{8, 32}},
		{map[string][]int{"gpu": {64}}, nil, []int{UnrecordedLabelRank}},
		{nil, nil, []int{UnrecordedLabelRank}},
		{map[string][]int{"cpu": {64}}, []string{"cpu"}, nil},
	} {
		g := randomGCN(t, 23)
		g.RuleHeads = c.ruleHeads
		g.LabelRanks = c.ranks
		m := exportParsed(t, g, "m.onnx")
		for h, r := range c.ranks {
			if !slices.Equal(m.Info.LabelRanks[h], r) {
				t.Errorf("%v: read back %v for head %s", c.ranks, m.Info.LabelRanks[h], h)
			}
		}
		pr, err := GCNPredictor{Model: m}.PredictDevice(s, hetero.SpTTM, 0, cpu)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(pr.LearntRanks, c.want) {
			t.Errorf("%v, rule heads %v: learnt ranks %v, want %v", c.ranks, c.ruleHeads, pr.LearntRanks, c.want)
		}
		if back, err := m.GCN(); err != nil || len(back.LabelRanks) != len(c.ranks) {
			t.Errorf("GCN of the file: label ranks %v, %v; want %v", back.LabelRanks, err, c.ranks)
		}
		if want := slices.Contains(c.ranks["cpu"], 64); m.Info.LearntAtRank(cpu, 64) != want {
			t.Errorf("%v: LearntAtRank(64) = %v, want %v", c.ranks, !want, want)
		}
	}
	g := randomGCN(t, 23)
	g.LabelRanks = map[string][]int{"cpu": {32, 16}}
	if _, err := g.ExportONNX(); err == nil || !strings.Contains(err.Error(), "label ranks of head cpu") {
		t.Errorf("ranks out of order: export error %v", err)
	}
	for _, c := range []struct {
		learnt []int
		rank   int
		note   bool
	}{
		{[]int{16}, 16, false},
		{[]int{16}, 8, false},
		{[]int{16}, 31, false},
		{[]int{16}, 32, true},
		{[]int{16}, 7, true},
		{[]int{16}, 64, true},
		{[]int{8, 32}, 63, false},
		{[]int{8, 32}, 64, true},
		{[]int{8, 32}, 4, false},
		{[]int{8, 32}, 3, true},
		{nil, 64, false},
	} {
		note := RankNote(c.learnt, c.rank)
		if (note != "") != c.note || c.note && (!strings.Contains(note, fmt.Sprintf("not %d", c.rank)) || !strings.Contains(note, fmt.Sprintf("tune-model --rank %d", c.rank))) {
			t.Errorf("RankNote(%v, %d) = %q, want a note: %v", c.learnt, c.rank, note, c.note)
		}
	}
}

// TestProcessorWarning: a model records which processors measured each
// cpu head's labels, and a prediction on another processor says so where
// the answer was learnt (network or trees), not where the head defers to
// the rule; the same processor, an unknown one and other heads get no
// such warning.
func TestProcessorWarning(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 8))
	s, err := features.Summarize(familyTensor(rng, 1))
	if err != nil {
		t.Fatal(err)
	}
	warned := func(pr *Prediction) bool {
		for _, w := range pr.Warnings {
			if strings.Contains(w, "measured on Elsewhere 9000, Other") && strings.Contains(w, "tune-model") {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		models    []string
		host      string
		ruleHeads []string
		want      bool
	}{
		{[]string{"Elsewhere 9000", "Other"}, "Here, 2 cores", nil, true},
		{[]string{"Elsewhere 9000", "Other"}, "Here, 2 cores", []string{"cpu"}, false},
		{[]string{"Elsewhere 9000", "Other"}, "Other", nil, false},
		{[]string{"Elsewhere 9000", "Other"}, "", nil, false}, // host unknown
		{nil, "Here, 2 cores", nil, false},                    // not recorded
	} {
		g := randomGCN(t, 23)
		g.RuleHeads = c.ruleHeads
		g.CPUModels = map[string][]string{"cpu": c.models, "not a head": {"x"}}
		m := exportParsed(t, g, "m.onnx")
		if !slices.Equal(m.Info.CPUModels["cpu"], c.models) || len(m.Info.CPUModels) > 1 {
			t.Fatalf("read back cpu models %v, want %v for the cpu head alone", m.Info.CPUModels, c.models)
		}
		p := GCNPredictor{Model: m}
		pr, err := p.PredictDevice(s, hetero.SpTTM, 0, hetero.Info{Name: "cpu", Kind: hetero.CPU, Model: c.host})
		if err != nil {
			t.Fatal(err)
		}
		if warned(pr) != c.want {
			t.Errorf("models %v on %q, rule heads %v: warnings %q, want the processor warning: %v", c.models, c.host, c.ruleHeads, pr.Warnings, c.want)
		}
		gp := GCNPredictor{Model: m, Class: "gpu", DeviceModel: c.host}
		if pr, err := gp.PredictSummary(s, hetero.SpTTM, 0, hetero.GPU); err != nil || warned(pr) {
			t.Errorf("gpu head: warnings %q, %v", pr.Warnings, err)
		}
		back, err := m.GCN()
		if err != nil || !slices.Equal(back.CPUModels["cpu"], c.models) {
			t.Errorf("GCN of the file: cpu models %v, %v", back.CPUModels, err)
		}
	}
	// A head chosen for want of one of this CPU's kind warns once, not
	// again for its processors.
	g := randomGCN(t, 23)
	name := CPUHead("elsewhere", "amd")
	g.Config.Heads[0].Name = name
	g.CPUModels = map[string][]string{name: {"AMD Elsewhere 9000"}}
	m := exportParsed(t, g, "m.onnx")
	pr, err := GCNPredictor{Model: m}.PredictDevice(s, hetero.SpTTM, 0, hetero.Info{Name: "cpu", Kind: hetero.CPU, Model: "Intel(R) Here"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(slices.Clone(pr.Warnings), func(w string) bool { return !strings.Contains(w, "tune-model") })); n != 1 || !strings.Contains(pr.Warnings[0], "answering with the "+name+" head") {
		t.Errorf("a nearest head on another processor: warnings %q, want one naming the head", pr.Warnings)
	}
}
