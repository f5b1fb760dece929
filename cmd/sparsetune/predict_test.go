package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/graphenc"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/hetero/heterotest"
	"github.com/sparsetune/sparsetune/model"
)

func predictRows(t *testing.T, args ...string) []predictRow {
	t.Helper()
	out, _, err := run(t, append([]string{"predict", "--json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var rows []predictRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return rows
}

// checkRanking checks one row per mode from the first row's mode on, each
// ranking exactly the op's formats with scores in [0, 1].
func checkRanking(t *testing.T, rows []predictRow, op hetero.Op, modes int) {
	t.Helper()
	if len(rows) != modes || modes == 0 {
		t.Fatalf("%d rows, want %d", len(rows), modes)
	}
	for i, r := range rows {
		var names []string
		for _, f := range r.Formats {
			names = append(names, f.Format)
			if math.IsNaN(f.Score) || f.Score < 0 || f.Score > 1 {
				t.Errorf("mode %d: score %v", r.Mode, f.Score)
			}
		}
		slices.Sort(names)
		want := slices.Sorted(slices.Values(op.Formats()))
		if r.Mode != rows[0].Mode+i || r.Format != r.Formats[0].Format || !slices.Equal(names, want) {
			t.Errorf("row %+v: want mode %d ranking %v", r, rows[0].Mode+i, want)
		}
	}
}

// TestPredictRuleAndMeasure runs the rule and measure-all on an unseen
// tensor; measure's decisions are cached and reused, --retune measures
// again.
func TestPredictRuleAndMeasure(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path := writeRandomTensor(t, []int{60, 50, 40}, 5000, 21)
	for _, op := range hetero.Ops {
		checkRanking(t, predictRows(t, path, "--op", op.String(), "--predictor", "rule"), op, 3)
	}
	first := predictRows(t, path, "--op", "mttkrp", "--predictor", "measure", "--iters", "2", "--rank", "8")
	checkRanking(t, first, hetero.MTTKRP, 3)
	again := predictRows(t, path, "--op", "mttkrp", "--predictor", "measure", "--iters", "2", "--rank", "8")
	retuned := predictRows(t, path, "--op", "mttkrp", "--predictor", "measure", "--iters", "2", "--rank", "8", "--retune")
	for i := range first {
		if first[i].Cached || !again[i].Cached || retuned[i].Cached {
			t.Errorf("mode %d: cached %v, %v, %v; want false, true, false", i+1, first[i].Cached, again[i].Cached, retuned[i].Cached)
		}
		if again[i].Format != first[i].Format || again[i].InferenceSeconds != first[i].InferenceSeconds {
			t.Errorf("mode %d: cached decision %+v differs from the measured %+v", i+1, again[i], first[i])
		}
		// Measuring is inside a measured row's total; a cached row's
		// total is its lookup and its share of the summary the lookup's
		// key was made from.
		if first[i].TotalSeconds < first[i].InferenceSeconds || again[i].SampleSeconds <= 0 || again[i].TotalSeconds <= again[i].SampleSeconds {
			t.Errorf("mode %d: measured total %g (measuring %g); cached total %g, sample %g", i+1, first[i].TotalSeconds, first[i].InferenceSeconds, again[i].TotalSeconds, again[i].SampleSeconds)
		}
	}
	greedy := predictRows(t, path, "--op", "ttm", "--mode", "2", "--predictor", "measure", "--iters", "2", "--greedy")
	checkRanking(t, greedy, hetero.SpTTM, 1)
	if greedy[0].Mode != 2 {
		t.Errorf("--mode 2 gave mode %d", greedy[0].Mode)
	}
}

// writeModel exports a GCN with random weights and the ttm formats as
// classes: it tests the plumbing from file to ranking, not the quality.
func writeModel(t *testing.T, trainMaxNNZ float64) string {
	t.Helper()
	c := model.DefaultConfig("ttm", model.Head{Name: "cpu", Classes: hetero.SpTTM.Formats()})
	c.Budget = graphenc.Budget{Rows: 16, Cols: 16}
	g, err := model.NewGCN(c, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	g.TrainMax[features.LogNNZ] = trainMaxNNZ
	return writeGCN(t, g, "ttm.onnx")
}

// writeGCN exports g into a model file of that name in a temporary
// directory and returns its path.
func writeGCN(t *testing.T, g *model.GCN, name string) string {
	t.Helper()
	data, err := g.ExportONNX()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPredictGCN runs a model file on unseen tensors of orders 3 to 5;
// one beyond the model's training range gets a warning, not a refusal.
func TestPredictGCN(t *testing.T) {
	modelPath := writeModel(t, 3.5)
	for _, dims := range [][]int{{60, 50, 40}, {20, 15, 10, 12}, {8, 9, 7, 6, 5}} {
		path := writeRandomTensor(t, dims, 2000, uint64(30+len(dims)))
		rows := predictRows(t, path, "--predictor", "gcn", "--model", modelPath)
		checkRanking(t, rows, hetero.SpTTM, len(dims))
		for _, r := range rows {
			sum := 0.0
			for _, f := range r.Formats {
				sum += f.Score
			}
			if math.Abs(sum-1) > 1e-5 || r.InferenceSeconds <= 0 || r.EncodingSeconds <= 0 {
				t.Errorf("%v mode %d: scores sum to %v, times %v %v", dims, r.Mode, sum, r.EncodingSeconds, r.InferenceSeconds)
			}
			if r.SampleSeconds <= 0 || r.TotalSeconds <= r.SampleSeconds {
				t.Errorf("%v mode %d: total %v, sample %v", dims, r.Mode, r.TotalSeconds, r.SampleSeconds)
			}
		}
		// The totals are the rows' shares of the summary and of the wall
		// time of their decisions, made side by side by up to as many
		// goroutines as modes and processors (predictModes), which holds
		// the parts timed inside each, and their sum over the goroutines.
		var wall, most, sum float64
		for _, r := range rows {
			parts := r.FeaturesSeconds + r.EncodingSeconds + r.InferenceSeconds
			wall, most, sum = wall+r.TotalSeconds-r.SampleSeconds, max(most, parts), sum+parts
		}
		workers := float64(min(len(dims), runtime.GOMAXPROCS(0)))
		if wall < most-1e-9 || wall < sum/workers-1e-9 {
			t.Errorf("%v: the decisions' totals add up to %gs, below the parts of one (%gs) or all's over %g goroutines (%gs)", dims, wall, most, workers, sum/workers)
		}
		// Every mode at once (one summary, prepared for all modes)
		// decides as one mode at a time does.
		for _, r := range rows {
			one := predictRows(t, path, "--predictor", "gcn", "--model", modelPath, "--mode", strconv.Itoa(r.Mode))
			if len(one) != 1 || !slices.Equal(one[0].Formats, r.Formats) {
				t.Errorf("%v mode %d: --mode all ranks %v, --mode %d %v", dims, r.Mode, r.Formats, r.Mode, one)
			}
		}
		// The onnx-go runtime ranks the formats as the builtin one does.
		other := predictRows(t, path, "--predictor", "gcn", "--model", modelPath, "--runtime", "onnx-go")
		for i := range rows {
			for k, f := range rows[i].Formats {
				if g := other[i].Formats[k]; g.Format != f.Format || math.Abs(g.Score-f.Score) > 1e-4 {
					t.Errorf("%v mode %d: onnx-go ranks %v, builtin %v", dims, rows[i].Mode, other[i].Formats, rows[i].Formats)
					break
				}
			}
		}
	}
	// The model records no label ranks, so it learnt at rank 16: at 64
	// its answer says so, at 16 and 12 it does not.
	small := writeRandomTensor(t, []int{60, 50, 40}, 2000, 33)
	for _, c := range []struct {
		rank string
		note bool
	}{{"64", true}, {"16", false}, {"12", false}, {"4", true}} {
		_, errOut, err := run(t, "predict", small, "--predictor", "gcn", "--model", modelPath, "--mode", "1", "--rank", c.rank)
		if noted := strings.Contains(errOut, "learnt from times at rank 16, not "+c.rank); err != nil || noted != c.note {
			t.Errorf("--rank %s: err %v, stderr %q; want the rank note: %v", c.rank, err, errOut, c.note)
		}
	}
	// A model with a head learnt at rank 64 beside its class's own
	// answers with the head nearest the rank, and names it.
	c := model.DefaultConfig("ttm", model.Head{Name: "cpu", Classes: hetero.SpTTM.Formats()}, model.Head{Name: model.RankHead("cpu", 64), Classes: hetero.SpTTM.Formats()})
	c.Budget = graphenc.Budget{Rows: 16, Cols: 16}
	g, err := model.NewGCN(c, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	g.LabelRanks = map[string][]int{"cpu": {16}, "cpu@r64": {64}}
	ranked := writeGCN(t, g, "ttm.onnx")
	for _, c := range []struct {
		rank, head string
		note       bool
	}{{"64", "cpu@r64", false}, {"128", "cpu@r64", true}, {"32", "cpu", true}, {"24", "cpu", false}, {"40", "cpu@r64", false}, {"16", "cpu", false}, {"4", "cpu", true}} {
		out, errOut, err := run(t, "predict", small, "--predictor", "gcn", "--model", ranked, "--mode", "1", "--rank", c.rank, "--json")
		var rows []predictRow
		if err == nil {
			err = json.Unmarshal([]byte(out), &rows)
		}
		if err == nil && len(rows) == 1 {
			errOut += strings.Join(rows[0].Warnings, "\n")
		}
		if noted := strings.Contains(errOut, "learnt from times at rank"); err != nil || len(rows) != 1 || rows[0].Head != c.head || noted != c.note {
			t.Errorf("ranked model at --rank %s: err %v, rows %+v, stderr %q; want head %s, the rank note: %v", c.rank, err, rows, errOut, c.head, c.note)
		}
	}
	big := writeRandomTensor(t, []int{300, 200, 100}, 5000, 40) // log10 5000 = 3.7 > 3.5
	out, errOut, err := run(t, "predict", big, "--predictor", "gcn", "--model", modelPath, "--mode", "1")
	if err != nil || !strings.Contains(errOut, "warning: ttm mode 1: feature log_nnz = 3.699 is outside the training range") || !strings.Contains(out, "gcn") {
		t.Errorf("err %v\nstdout %s\nstderr %s", err, out, errOut)
	}
}

func TestPredictErrors(t *testing.T) {
	path := writeRandomTensor(t, []int{50, 40, 30}, 500, 22)
	modelPath := writeModel(t, 10)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"predict", path, "--predictor", "oracle"}, `unknown predictor "oracle"`},
		{[]string{"predict", path, "--predictor", "svm"}, "--predictor svm: not available: golearn's linear SVM"},
		{[]string{"predict", path, "--mode", "4"}, "has modes 1 to 3, found 4"},
		{[]string{"predict", path, "--device", "cuda:7"}, "device cuda:7: "},
		{[]string{"predict", path, "--op", "mttkrp", "--predictor", "gcn", "--model", modelPath}, "predicts for ttm, not mttkrp"},
		{[]string{"predict", path, "--predictor", "gcn", "--model", path}, "model " + path + ": "},
	} {
		_, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args[1:], err, tc.want)
		}
	}
}

func TestModelInspect(t *testing.T) {
	out, _, err := run(t, "model", "inspect", "../../model/testdata/sanity.onnx", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var info model.Info
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if info.Op != "ttm" || info.Budget != (graphenc.Budget{Rows: 32, Cols: 32}) || len(info.Heads) != 1 || len(info.Heads[0].Classes) != 4 ||
		info.FormatVersion != model.FormatVersion || len(info.Features) != features.Count || info.FeatureRevision != features.Revision {
		t.Errorf("inspect: %+v", info)
	}
	out, _, err = run(t, "model", "inspect", "../../model/testdata/sanity.onnx")
	if err != nil || !strings.Contains(out, "head cpu") || !strings.Contains(out, "log_fiber_nnz_cv") || !strings.Contains(out, "revision "+strconv.Itoa(features.Revision)) {
		t.Errorf("inspect text: %v\n%s", err, out)
	}
	// The default MTTKRP model names the processors of each cpu head.
	out, _, err = run(t, "model", "inspect", "../../model/default/mttkrp.onnx")
	if err != nil || !strings.Contains(out, "processors cpu/avx512+pext/intel") || !strings.Contains(out, "Intel(R) Xeon(R) Processor (whose times trained the head)") || !strings.Contains(out, "cpu inner loops") {
		t.Errorf("inspect the default mttkrp model: %v\n%s", err, out)
	}
	// and the ranks of each head's labels: 16 in the default files, none
	// recorded in the sanity one (made before files recorded them), two
	// where a model file records them.
	if !regexp.MustCompile(`label ranks cpu/avx512\+pext/amd +16 \(the ranks its labels were timed at\)`).MatchString(out) {
		t.Errorf("inspect the default mttkrp model: no label ranks\n%s", out)
	}
	if out, _, err = run(t, "model", "inspect", "../../model/default/ttm.onnx"); err != nil || !regexp.MustCompile(`label ranks cuda-gpu +16 \(`).MatchString(out) {
		t.Errorf("inspect the default ttm model: %v\n%s", err, out)
	}
	if out, _, err = run(t, "model", "inspect", "../../model/testdata/sanity.onnx"); err != nil || !strings.Contains(out, "label ranks cpu") || !strings.Contains(out, "not recorded (read as 16") {
		t.Errorf("inspect the sanity model: %v\n%s", err, out)
	}
	g, err := model.NewGCN(model.DefaultConfig("ttm", model.Head{Name: "cpu", Classes: hetero.SpTTM.Formats()}), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	g.LabelRanks = map[string][]int{"cpu": {8, 64}}
	if out, _, err = run(t, "model", "inspect", writeGCN(t, g, "ranked.onnx")); err != nil || !strings.Contains(out, "8 64 (the ranks its labels were timed at)") {
		t.Errorf("inspect a model with label ranks: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.onnx")
	if err := os.WriteFile(bad, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "model", "inspect", bad); err == nil || !strings.HasPrefix(err.Error(), "model "+bad+": ") {
		t.Errorf("bad file: %v", err)
	}
}

// TestModelSeal: a file without a checksum (as older builds wrote) is
// inspected as such, seal adds one once, and a damaged sealed file fails
// to load, to inspect and to seal. Inspect reads every head's trees of a
// sealed file, which a load leaves for their first use.
func TestModelSeal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.onnx")
	writeModelWithout(t, "../../model/testdata/sanity.onnx", path, "sparsetune.checksum")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := run(t, "model", "inspect", path); err != nil || !strings.Contains(out, "none (written before model files had one") {
		t.Errorf("inspect a file without a checksum: %v\n%s", err, out)
	}
	for _, want := range []string{": checksum added", "has a checksum already and nothing to pack"} {
		if out, _, err := run(t, "model", "seal", path); err != nil || !strings.Contains(out, want) {
			t.Errorf("seal: %v, %q; want %q", err, out, want)
		}
	}
	if out, _, err := run(t, "model", "seal", path, "--json"); err != nil || strings.TrimSpace(out) != `{"file":"`+path+`","checksum_added":false,"trees_packed":false}` {
		t.Errorf("seal --json: %v, %q", err, out)
	}
	out, _, err := run(t, "model", "inspect", path)
	if err != nil || !strings.Contains(out, "CRC-32C of the file, matched") {
		t.Errorf("inspect the sealed file: %v\n%s", err, out)
	}
	sealed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(sealed, data) {
		t.Error("seal changed the bytes before the checksum")
	}
	// A byte of the doc string changed: the file still parses.
	i := bytes.Index(sealed, []byte("SPT-GCN"))
	if i < 0 {
		t.Fatal("no doc string")
	}
	sealed[i] = 's'
	if err := os.WriteFile(path, sealed, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"inspect", "seal"} {
		if _, _, err := run(t, "model", cmd, path); err == nil || !strings.Contains(err.Error(), "checksum mismatch") || !strings.HasPrefix(err.Error(), "model "+path+": ") || strings.Contains(err.Error(), "model model") {
			t.Errorf("%s a damaged file: %v", cmd, err)
		}
	}
	notModel := filepath.Join(t.TempDir(), "x.onnx")
	if err := os.WriteFile(notModel, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// (protobuf's own words vary on purpose: only ours are matched.)
	if _, _, err := run(t, "model", "seal", notModel); err == nil || !strings.HasPrefix(err.Error(), "model "+notModel+": not an ONNX protobuf: ") {
		t.Errorf("seal a file that is not a model: %v", err)
	}
	out, _, err = run(t, "model", "inspect", "../../model/default/mttkrp.onnx", "--json")
	var info model.Info
	if err == nil {
		err = json.Unmarshal([]byte(out), &info)
	}
	if err != nil || !info.Sealed || len(info.TreeHeads) == 0 || info.TreeNodes == 0 || !slices.Equal(info.PackedTrees, info.TreeHeads) || info.Weights == 0 {
		t.Errorf("inspect the default MTTKRP model: %v, sealed %v, tree heads %v, %d nodes, packed %v, %d weights", err, info.Sealed, info.TreeHeads, info.TreeNodes, info.PackedTrees, info.Weights)
	}
}

// TestModelSealPacks: a file of a build before packed trees (the default
// MTTKRP model without them or a checksum) loads and predicts, reading
// its trees from their nodes; seal packs them and seals it, once, and
// the file predicts the same, every head of it.
func TestModelSealPacks(t *testing.T) {
	old := filepath.Join(t.TempDir(), "old.onnx")
	writeModelWithout(t, "../../model/default/mttkrp.onnx", old, "sparsetune.checksum", "sparsetune.packed_trees")
	out, _, err := run(t, "model", "inspect", old)
	if err != nil || !regexp.MustCompile(`packed trees +none \(the others are read from their nodes`).MatchString(out) {
		t.Errorf("inspect a file without packed trees: %v\n%s", err, out)
	}
	tensor := writeRandomTensor(t, []int{300, 200, 100}, 20000, 5)
	// Every head of the file: the cpu's of this machine and of the
	// others (the ranks and processors the heads were trained for), and
	// the OpenCL ones where there is an OpenCL device (PoCL in CI, where
	// SPARSETUNE_OPENCL_TESTS=1 requires one).
	devs := []string{"cpu"}
	if d := heterotest.OpenCL(t); d != nil {
		devs = append(devs, d.Info().Name)
	}
	var devices [][]string
	for _, d := range devs {
		for _, rank := range []string{"8", "16", "32", "64"} {
			devices = append(devices, []string{"--device", d, "--rank", rank})
		}
	}
	predict := func(file string) string {
		t.Helper()
		var b strings.Builder
		for _, d := range devices {
			for _, r := range predictRows(t, append([]string{tensor, "--op", "mttkrp", "--mode", "all", "--model", file}, d...)...) {
				fmt.Fprintf(&b, "%s mode %d %s %s %s %v\n", r.Device, r.Mode, r.Predictor, r.Head, r.Format, r.Formats)
			}
		}
		return b.String()
	}
	want := predict("../../model/default/mttkrp.onnx")
	if got := predict(old); got != want {
		t.Errorf("the file without packed trees predicts\n%s\nthe default model\n%s", got, want)
	}
	for _, want := range []string{": trees packed, checksum added", "nothing to pack"} {
		if out, _, err := run(t, "model", "seal", old); err != nil || !strings.Contains(out, want) {
			t.Errorf("seal: %v, %q; want %q", err, out, want)
		}
	}
	if got := predict(old); got != want {
		t.Errorf("the file sealed again predicts\n%s\nthe default model\n%s", got, want)
	}
	out, _, err = run(t, "model", "inspect", old)
	if err != nil || !strings.Contains(out, "every tree head's, scored where they lie") {
		t.Errorf("inspect the packed file: %v\n%s", err, out)
	}
}

// TestPredictBaselines fits the tree and the kNN on a small
// labelled set and predicts for a tensor it has not seen.
func TestPredictBaselines(t *testing.T) {
	set := model.NewBaselineSet()
	for i := range 12 {
		x, err := formats.ReadFile(writeRandomTensor(t, []int{20 + 10*i, 30, 40}, 500+100*i, uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		v, err := features.Global(x, hetero.SpTTM, 0)
		if err != nil {
			t.Fatal(err)
		}
		best := "csr"
		if i%2 == 1 {
			best = "hyb"
		}
		set.Examples = append(set.Examples, model.BaselineExample{Op: "ttm", Kind: "cpu", Features: v[:], Best: best})
	}
	path := filepath.Join(t.TempDir(), "labels.json")
	if err := model.WriteBaselineSet(path, set); err != nil {
		t.Fatal(err)
	}
	unseen := writeRandomTensor(t, []int{55, 31, 17}, 900, 99)
	for _, method := range model.BaselineMethods() {
		out, _, err := run(t, "predict", unseen, "--predictor", method, "--model", path, "--mode", "1", "--json")
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("%s: %v\n%s", method, err, out)
		}
		if f := rows[0]["format"]; f != "csr" && f != "hyb" {
			t.Errorf("%s: format %v", method, f)
		}
	}
	if _, _, err := run(t, "predict", unseen, "--predictor", "tree"); err == nil || !strings.Contains(err.Error(), "--predictor tree needs --model FILE") {
		t.Errorf("tree without a model: %v", err)
	}
}

// predict FILE needs no flags: the embedded default model answers.
func TestPredictNoFlags(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path := filepath.Join(dataDir, "tensors", "kg_umls.tns")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	// The default SpTTM model's CPU heads defer to the rule and
	// MTTKRP's answer with boosted trees (each scored above the network:
	// docs/model.md); --predictor network asks the network anyway.
	for _, c := range []struct {
		op, predictor string
		args          []string
	}{{"ttm", "gcn/rule", nil}, {"mttkrp", "gcn/boosted", nil}, {"mttkrp", "network", []string{"--predictor", "network"}}} {
		out, _, err := run(t, append([]string{"predict", path, "--op", c.op, "--json"}, c.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var rows []predictRow
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 3 {
			t.Fatalf("%s: %d rows, want one per mode", c.op, len(rows))
		}
		op, _ := hetero.ParseOp(c.op)
		for _, r := range rows {
			if c.predictor == "gcn/boosted" && r.Predictor == "gcn/blend" {
				// The trees were unsure and asked the network too
				// (the head's blend margin): a graph was encoded.
				if r.EncodingSeconds == 0 {
					t.Errorf("%s: blend row with no encoding", c.op)
				}
				continue
			}
			if r.Predictor != c.predictor || !slices.Contains(op.Formats(), r.Format) || r.TotalSeconds <= 0 {
				t.Errorf("%s: row %+v, want predictor %s", c.op, r, c.predictor)
			}
			if c.predictor == "gcn/rule" && (r.Format != model.RuleChoice(op, hetero.CPU) || r.SampleSeconds != 0) {
				t.Errorf("%s: rule row %+v: want %s with no sample", c.op, r, model.RuleChoice(op, hetero.CPU))
			}
			// Trees read the global features alone; the network a graph.
			if c.predictor != "gcn/rule" && (c.predictor == "gcn/boosted") != (r.EncodingSeconds == 0) {
				t.Errorf("%s: %s row with encoding %gs", c.op, c.predictor, r.EncodingSeconds)
			}
		}
	}
}

// TestPredictPicked: predict reads a file's sample as it reads the file
// (formats.ReadFilePicked); its answers are those of the summary made from
// the tensor after reading, and each row counts a share of the picking.
func TestPredictPicked(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	rng := rand.New(rand.NewPCG(21, 21))
	x, _ := formats.NewCOO([]int{2000, 1500, 30}, 200_000)
	for range 200_000 {
		u := rng.Float64()
		x.Append([]uint32{uint32(u * u * 2000), uint32(rng.IntN(1500)), uint32(rng.IntN(30))}, 1)
	}
	x.SumDuplicates()
	if features.SampleNNZ(x.NNZ()) >= x.NNZ() {
		t.Fatal("the tensor is read whole: no picks to test")
	}
	dir := t.TempDir()
	for _, ext := range []string{".stb", ".tns"} {
		path := filepath.Join(dir, "x"+ext)
		if err := formats.WriteFile(path, x); err != nil {
			t.Fatal(err)
		}
		_, _, picks, _, err := loadTensorPicked(os.Stderr, []string{path}, true)
		if err != nil || picks == nil {
			t.Fatalf("%s: picks %v, %v", ext, picks, err)
		}
		for _, op := range []string{"mttkrp", "ttm"} {
			got := predictRows(t, path, "--op", op)
			cfg := predictConfig{predictor: "gcn", devices: []string{"cpu"}, runtime: "builtin"}
			cfg.op, _ = hetero.ParseOp(op)
			var out strings.Builder
			if err := runPredict(&out, os.Stderr, path, x, nil, cfg, true); err != nil {
				t.Fatal(err)
			}
			var want []predictRow
			if err := json.Unmarshal([]byte(out.String()), &want); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%s %s: %d rows, want %d", ext, op, len(got), len(want))
			}
			for i := range got {
				if got[i].Predictor != want[i].Predictor || !slices.Equal(got[i].Formats, want[i].Formats) {
					t.Errorf("%s %s mode %d: %s %v from picks, %s %v from the tensor", ext, op, got[i].Mode, got[i].Predictor, got[i].Formats, want[i].Predictor, want[i].Formats)
				}
				if strings.HasPrefix(got[i].Predictor, "gcn/rule") == (got[i].SampleSeconds > 0) {
					t.Errorf("%s %s mode %d: %s row with sample %gs", ext, op, got[i].Mode, got[i].Predictor, got[i].SampleSeconds)
				}
			}
			if op != "mttkrp" {
				continue
			}
			// The picks are what the summary reads: picks of a
			// different sample (every nonzero at index 0 of mode 1)
			// change the answer.
			other := &formats.Picks{NNZ: picks.NNZ, Pos: picks.Pos, Inds: slices.Clone(picks.Inds)}
			other.Inds[0] = make([]uint32, len(picks.Pos))
			out.Reset()
			if err := runPredict(&out, os.Stderr, path, x, other, cfg, true); err != nil {
				t.Fatal(err)
			}
			var moved []predictRow
			if err := json.Unmarshal([]byte(out.String()), &moved); err != nil {
				t.Fatal(err)
			}
			if slices.EqualFunc(moved, want, func(a, b predictRow) bool { return slices.Equal(a.Formats, b.Formats) }) {
				t.Errorf("%s: predict answered the same from other picks: the picks are not read", ext)
			}
		}
	}
}

// TestPredictModesSideBySide: with every mode asked for of a model, the
// modes' decisions are made side by side (predictModes); each answers as
// the same mode asked for alone does, and reports a positive share of
// the time.
func TestPredictModesSideBySide(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, dims := range [][]int{{3000, 200, 40}, {500, 60, 900, 20}} {
		// Past features.ExactNNZ: decided from a sample.
		path := writeRandomTensor(t, dims, 150_000, uint64(31+len(dims)))
		for _, predictor := range []string{"gcn", "network"} {
			all := predictRows(t, path, "--op", "mttkrp", "--mode", "all", "--predictor", predictor)
			if len(all) != len(dims) {
				t.Fatalf("%v %s: %d rows, want %d", dims, predictor, len(all), len(dims))
			}
			for m, r := range all {
				one := predictRows(t, path, "--op", "mttkrp", "--mode", fmt.Sprint(m+1), "--predictor", predictor)
				if len(one) != 1 || one[0].Predictor != r.Predictor || !slices.Equal(one[0].Formats, r.Formats) {
					t.Errorf("%v %s mode %d: %s %v of every mode, %+v alone", dims, predictor, m+1, r.Predictor, r.Formats, one)
				}
				if r.TotalSeconds <= 0 || r.SampleSeconds <= 0 {
					t.Errorf("%v %s mode %d: total %gs, sample %gs", dims, predictor, m+1, r.TotalSeconds, r.SampleSeconds)
				}
			}
		}
	}
}

// TestSideBySideOrder: every mode once, the first and the last first
// (they share no count along MTTKRP), the rest in order.
func TestSideBySideOrder(t *testing.T) {
	for n, want := range [][]int{0: {}, 1: {0}, 2: {0, 1}, 3: {0, 2, 1}, 4: {0, 3, 1, 2}, 5: {0, 4, 1, 2, 3}} {
		if got := sideBySideOrder(n); !slices.Equal(got, want) {
			t.Errorf("order %d: %v, want %v", n, got, want)
		}
	}
	// The global features of MTTKRP along mode m describe the fibers of
	// the last mode of formats.RootedOrder(n, m) (features.Summary.Global).
	last := func(n, m int) int { r := formats.RootedOrder(n, m); return r[len(r)-1] }
	for n := 2; n <= 8; n++ {
		if a, b := last(n, 0), last(n, n-1); a == b {
			t.Errorf("order %d: MTTKRP along the first and the last mode reads the fibers of one mode, %d", n, a+1)
		}
	}
}
