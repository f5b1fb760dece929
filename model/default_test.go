package model

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
)

// The embedded default models load, answer for the CPU's class with a
// format of their op, and refuse another class; a user's own model wins.
func TestDefaultModel(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	_, s := nationsSummary(t)
	for _, op := range hetero.Ops {
		m, err := DefaultModel(op)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		// A cpu head: one, or one per kind of hardware.
		if h, _ := m.Info.HeadFor("cpu", "avx512+pext", "AMD EPYC"); m.Info.Op != op.String() || h < 0 || !strings.HasPrefix(m.Info.Path, "embedded:") {
			t.Errorf("%s: op %s, heads %v, path %s", op, m.Info.Op, headNames(m.Info.Heads), m.Info.Path)
		}
		p := GCNPredictor{Model: m}
		pr, err := p.PredictDevice(s, op, 0, hetero.NewCPU(1).Info())
		if err != nil || !slices.Contains(op.Formats(), pr.Best()) {
			t.Errorf("%s on the CPU: %v, %v", op, pr, err)
		}
		// The labels measured on an H100 (docs/gpu.md) and on PoCL give
		// cuda-gpu and opencl-cpu heads of their own; OpenCL on a GPU
		// (opencl-gpu) has none.
		for _, acc := range []hetero.Info{{Name: "cuda:0", Kind: hetero.GPU, Type: "gpu"}, {Name: "opencl:0", Kind: hetero.GPU, Type: "cpu"}} {
			if pr, err := p.PredictDevice(s, op, 0, acc); err != nil || !slices.Contains(op.Formats(), pr.Best()) || pr.Best() == "hicoo" {
				t.Errorf("%s on %s: %v, %v", op, acc.Name, pr, err)
			}
		}
		if _, err := p.PredictDevice(s, op, 0, hetero.Info{Name: "opencl:1", Kind: hetero.GPU, Type: "gpu"}); err == nil || !strings.Contains(err.Error(), ErrNoHead.Error()) {
			t.Errorf("%s on a class without a head: %v", op, err)
		}
	}
	// A user's model (tune-model installs one) wins over the embedded one.
	path, err := UserModelPath(hetero.SpTTM)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "sanity.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := DefaultModel(hetero.SpTTM); err != nil || m.Info.Path != path {
		t.Errorf("with a user model: %v, %v", m, err)
	}
}

// BenchmarkEmbeddedModel reads and checks each embedded model file, as
// every process that predicts does once (docs/model.md, "Prediction
// cost").
func BenchmarkEmbeddedModel(b *testing.B) {
	for _, op := range []hetero.Op{hetero.MTTKRP, hetero.SpTTM} {
		b.Run(op.String(), func(b *testing.B) {
			for b.Loop() {
				if _, err := EmbeddedModel(op); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The embedded models are sealed, so a process reads only the trees of
// the heads it predicts with, where they lie packed, and its graph when
// it first needs it; and their checksum is not computed at load
// (EmbeddedModel): so the checksum is checked here, and every head's
// trees are read from their node and packed again, which must give the
// bytes the file holds, and the graph is read.
func TestEmbeddedModelsWhole(t *testing.T) {
	for _, op := range hetero.Ops {
		m, err := EmbeddedModel(op)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if !m.Info.Sealed {
			t.Errorf("%s: the embedded model has no checksum (sparsetune model seal adds one)", op)
		}
		data := defaultTTM
		if op == hetero.MTTKRP {
			data = defaultMTTKRP
		}
		if _, err := ParseONNX("checked", data); err != nil {
			t.Errorf("%s: %v", op, err)
		}
		if err := m.Check(); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		trees, err := m.Info.AllTrees()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if len(trees) != len(m.Info.TreeHeads) || m.Info.TreeNodes == 0 && len(trees) > 0 || m.Info.Weights == 0 {
			t.Errorf("%s: trees of %d heads, %d nodes, for tree heads %v; %d weights", op, len(trees), m.Info.TreeNodes, m.Info.TreeHeads, m.Info.Weights)
		}
		if !slices.Equal(m.Info.PackedTrees, m.Info.TreeHeads) {
			t.Errorf("%s: packed trees for %v, tree heads %v (sparsetune model seal packs them)", op, m.Info.PackedTrees, m.Info.TreeHeads)
		}
		for _, h := range m.Info.PackedTrees {
			if p := packTrees(trees[h]); p == nil || !bytes.Equal(p.all, m.Info.trees.heads[h].packed) {
				t.Errorf("%s: head %s: the packed trees differ from its node", op, h)
			}
		}
	}
}

// An Info not read from a file (a zero one, or one decoded from JSON)
// has no trees, and asking for them is no error.
func TestInfoWithoutFile(t *testing.T) {
	var in Info
	if tr, err := in.Trees("cpu"); tr != nil || err != nil {
		t.Errorf("Trees: %v, %v", tr, err)
	}
	if all, err := in.AllTrees(); len(all) != 0 || err != nil {
		t.Errorf("AllTrees: %v, %v", all, err)
	}
}

// nationsSummary reads the real tensor kg_nations and summarises it; it
// skips the test where the real data is absent.
func nationsSummary(t *testing.T) (*formats.COO, *features.Summary) {
	t.Helper()
	x, err := formats.ReadFile(filepath.Join("..", "..", "shared", "data", "tensors", "kg_nations.tns"))
	if err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	s, err := features.Summarize(x)
	if err != nil {
		t.Fatal(err)
	}
	return x, s
}
