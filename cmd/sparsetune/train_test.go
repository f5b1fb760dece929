package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparsetune/sparsetune/model"
)

// TestTrainEval runs the whole pipeline on a tiny generated set, as CI
// does: gen, label (one run per format), train (3 grouped folds, a few
// epochs, plots), eval of the written models in text and JSON.
func TestTrainEval(t *testing.T) {
	skipWithoutMatrices(t)
	start := time.Now()
	tmp := t.TempDir()
	set, labels := filepath.Join(tmp, "set"), filepath.Join(tmp, "labels.jsonl")
	if _, _, err := run(t, "gen", "--from", matrixDir, "--out", set, "--count", "3", "--seed", "9", "--max-nnz", "2000"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "label", "--in", set, "--out", labels, "--runs", "1", "--rank", "4"); err != nil {
		t.Fatal(err)
	}
	labelled := time.Since(start)
	out, plots := filepath.Join(tmp, "model.onnx"), filepath.Join(tmp, "plots")
	stdout, stderr, err := run(t, "train", "--labels", labels, "--out", out, "--folds", "3", "--epochs", "5", "--plots", plots)
	if err != nil {
		t.Fatal(err)
	}
	trained := time.Since(start) - labelled
	for _, want := range append([]string{"3-fold cross-validation grouped by source", "gcn", "rule", "always coo", "measure-all", "wrote "}, model.BaselineMethods()...) {
		if !strings.Contains(stdout, want) {
			t.Errorf("train output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "fold 3/3: training the mttkrp GCN") || !strings.Contains(stderr, "final model") {
		t.Errorf("train progress: %q", stderr)
	}
	var models []string
	for _, op := range []string{"ttm", "mttkrp"} {
		path := filepath.Join(tmp, "model."+op+".onnx")
		m, err := model.LoadONNX(path)
		if err != nil {
			t.Fatal(err)
		}
		if m.Info.Op != op || m.Info.HeadIndex("cpu") < 0 {
			t.Errorf("%s: op %s heads %v", path, m.Info.Op, m.Info.Heads)
		}
		models = append(models, path)
	}
	pngs, _ := filepath.Glob(filepath.Join(plots, "*.png"))
	if len(pngs) != 5 {
		t.Errorf("plots %v", pngs)
	}
	stdout, _, err = run(t, "eval", "--labels", labels, "--model", strings.Join(models, ","), "--folds", "3", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var scores []map[string]any
	if err := json.Unmarshal([]byte(stdout), &scores); err != nil {
		t.Fatalf("eval --json: %v\n%s", err, stdout)
	}
	var seen []string
	for _, s := range scores {
		for _, k := range []string{"op", "device_class", "predictor", "n", "accuracy", "tie_accuracy", "oracle_ratio"} {
			if _, ok := s[k]; !ok {
				t.Fatalf("eval --json: %v lacks %s", s, k)
			}
		}
		seen = append(seen, s["op"].(string)+"/"+s["predictor"].(string))
	}
	wants := []string{"ttm/gcn", "mttkrp/gcn", "ttm/rule", "ttm/always ell", "mttkrp/always alto", "mttkrp/measure-all"}
	for _, b := range model.BaselineMethods() {
		wants = append(wants, "ttm/"+b)
	}
	for _, want := range wants {
		if !slices.Contains(seen, want) {
			t.Errorf("eval --json has no %s: %v", want, seen)
		}
	}
	for _, s := range scores {
		if _, ok := s["measure_cost"]; ok != (s["predictor"] == "measure-all") {
			t.Errorf("eval --json: measure_cost on %v", s)
		}
	}
	// One model, for ttm: the mttkrp rows get no gcn line, and a warning;
	// --by-nnz adds a table by nonzero range.
	stdout, stderr, err = run(t, "eval", "--labels", labels, "--model", models[0], "--folds", "3", "--by-nnz")
	if err != nil || !strings.Contains(stdout, "oracle ratio") || regexp.MustCompile(`mttkrp\s+cpu\s+gcn`).MatchString(stdout) {
		t.Fatalf("eval table: %v\n%s", err, stdout)
	}
	if _, byNNZ, ok := strings.Cut(stdout, "by nonzeros:"); !ok || !regexp.MustCompile(`(?m)^\s+ttm\s+cpu\s+(0-100|100-1K|1K-10K|10K-100K|>100K)\s+gcn\s+\d+`).MatchString(byNNZ) {
		t.Errorf("eval --by-nnz: no table by nonzeros with a ttm gcn line:\n%s", stdout)
	}
	if !strings.Contains(stderr, "warning: no model for mttkrp: ") {
		t.Errorf("eval with the ttm model only: stderr %q", stderr)
	}
	t.Logf("gen+label %v, train %v, eval %v", labelled.Round(time.Millisecond), trained.Round(time.Millisecond), (time.Since(start) - labelled - trained).Round(time.Millisecond))
}

// TestTrainEvalErrors: missing flags and bad inputs are one clear line.
func TestTrainEvalErrors(t *testing.T) {
	tmp := t.TempDir()
	labels := filepath.Join(tmp, "labels.jsonl")
	if err := os.WriteFile(labels, []byte("{\"tensor\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(tmp, "d.onnx"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--out", "m.onnx"}, "train needs --labels FILE"},
		{[]string{"train", "--labels", labels, "--out", "m.onnx", "--folds", "0"}, "--folds, --epochs, --patience and --hidden must be at least 1"},
		{[]string{"train", "--labels", labels, "--out", "m.onnx", "--hidden", "0"}, "--folds, --epochs, --patience and --hidden must be at least 1"},
		{[]string{"train", "--labels", labels, "--out", "m.onnx", "--soft", "-1"}, "--soft must be 0 or more, and finite, found -1"},
		{[]string{"train", "--labels", labels, "--out", "m.onnx", "--soft", "Inf"}, "--soft must be 0 or more, and finite, found +Inf"},
		// Never over the labels, nor beside a directory named as the model.
		{[]string{"train", "--labels", labels, "--out", labels}, "--out " + labels + ": expected a model file name ending in .onnx"},
		{[]string{"train", "--labels", labels, "--out", tmp}, "--out " + tmp + ": expected a model file name ending in .onnx"},
		{[]string{"train", "--labels", labels, "--out", filepath.Join(tmp, "d.onnx")}, "--out " + filepath.Join(tmp, "d.onnx") + ": is a directory, expected a file name"},
		{[]string{"train", "--labels", labels, "--out", "m.onnx", "--average", "1"}, "--average must be in [0, 1), found 1"},
		{[]string{"train", "--labels", labels, "--out", "m.onnx"}, labels + ":1: tensor"},
		// Before the labels are read and a model trained, not after.
		{[]string{"train", "--labels", labels, "--out", filepath.Join(tmp, "nowhere", "m.onnx")}, filepath.Join(tmp, "nowhere") + " does not exist"},
		// A plots directory that cannot be made: a file stands in its way.
		{[]string{"train", "--labels", labels, "--out", filepath.Join(tmp, "m.onnx"), "--plots", filepath.Join(labels, "plots")}, "--plots " + filepath.Join(labels, "plots") + ": not a directory"},
		{[]string{"eval", "--labels", labels, "--plots", filepath.Join(labels, "plots")}, "--plots " + filepath.Join(labels, "plots") + ": not a directory"},
		{[]string{"eval", "--labels", labels}, labels + ":1: tensor"}, // the default model, once the labels read
		// A model named that would score no row.
		{[]string{"eval", "--labels", "../../model/default/labels-cpu-xeon-avx512-v3.jsonl.gz", "--model", "../../model/default/ttm.onnx"},
			"--model ../../model/default/ttm.onnx predicts for ttm, and ../../model/default/labels-cpu-xeon-avx512-v3.jsonl.gz holds no ttm rows"},
		{[]string{"eval", "--labels", labels, "--model", labels}, "model " + labels + ": "},
	} {
		_, _, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

// TestModelPaths: one op keeps --out, several get the op before the
// extension.
func TestModelPaths(t *testing.T) {
	if p := modelPaths("m.onnx", []string{"ttm"}); p["ttm"] != "m.onnx" {
		t.Errorf("%v", p)
	}
	if p := modelPaths("d/m.onnx", []string{"mttkrp", "ttm"}); p["ttm"] != "d/m.ttm.onnx" || p["mttkrp"] != "d/m.mttkrp.onnx" {
		t.Errorf("%v", p)
	}
}
