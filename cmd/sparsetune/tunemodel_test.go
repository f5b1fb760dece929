package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/model"
	"github.com/sparsetune/sparsetune/model/onnxpb"
	"github.com/sparsetune/sparsetune/train"
)

// TestTuneModel: the whole adaptation on a tiny generated set: generate,
// label on the CPU, hold out, fine-tune, print before and after, and
// install each op's model where it scores no worse (a file the default
// lookup then loads), or say it kept the old one. A second run resumes:
// it labels nothing new. The user's MTTKRP model starts out trained on
// features of an older revision, which this build refuses to feed:
// tune-model tunes from the embedded model instead and replaces it (or
// removes it, where the tuned one scores worse).
func TestTuneModel(t *testing.T) {
	from := filepath.Join(dataDir, "suitesparse")
	if _, err := os.Stat(from); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	stalePath, err := model.UserModelPath(hetero.MTTKRP)
	if err != nil {
		t.Fatal(err)
	}
	// A model of feature revision 1 (before files recorded one).
	writeModelWithout(t, "../../model/default/mttkrp.onnx", stalePath, "sparsetune.feature_revision", "sparsetune.checksum")
	if _, err := model.DefaultModel(hetero.MTTKRP); err == nil || !strings.Contains(err.Error(), "retrain it") {
		t.Fatalf("a user model of revision 1: %v, want an error saying to retrain it", err)
	}
	// A work path with a glob's metacharacters: tuneRows lists it, not globs it.
	work := filepath.Join(t.TempDir(), "tune[1]")
	args := []string{"tune-model", "--from", from, "--count", "12", "--max-nnz", "5000", "--budget", "2m", "--work", work}
	out, errOut, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "tuning from the embedded mttkrp model instead") {
		t.Errorf("stderr lacks the note on the stale mttkrp model:\n%s", errOut)
	}
	if _, err := model.DefaultModel(hetero.MTTKRP); err != nil {
		t.Errorf("after tune-model, the default mttkrp model: %v", err)
	}
	for _, want := range []string{"before (the model in effect)", "after (fine-tuned here)", "oracle ratio", "of a 2m0s budget"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, op := range hetero.Ops {
		path, err := model.UserModelPath(op)
		if err != nil {
			t.Fatal(err)
		}
		installed := strings.Contains(out, op.String()+": installed "+path)
		kept := strings.Contains(out, op.String()+": kept the model in effect")
		if op == hetero.MTTKRP {
			// The stale model is never kept: it is replaced or removed.
			kept = strings.Contains(out, op.String()+": removed "+path)
		}
		if installed == kept {
			t.Errorf("%s: installed %v, kept or removed %v: want exactly one\n%s", op, installed, kept, out)
		}
		if !installed {
			continue
		}
		m, err := model.DefaultModel(op)
		if err != nil || m.Info.Path != path || m.Info.HeadIndex("cpu") < 0 {
			t.Errorf("%s: the default lookup gives %v (%v), want the tuned %s with a cpu head", op, m, err, path)
		}
	}
	labels := filepath.Join(work, "labels.jsonl")
	first, err := os.ReadFile(labels)
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err = run(t, args...); err != nil {
		t.Fatal(err)
	}
	if again, err := os.ReadFile(labels); err != nil || string(again) != string(first) {
		t.Errorf("a second run changed the labels (%d bytes, then %d; %v): it should resume and find every row done", len(first), len(again), err)
	}
	// 12 tensors leave a few dozen held-out rows per op: too few to let
	// the tuned model replace one trained on thousands, unless forced.
	if !strings.Contains(out, "too few to tell the tuned model") {
		t.Errorf("a small set's run does not say its held-out rows are too few:\n%s", out)
	}
	if out, _, err = run(t, append(args, "--force")...); err != nil {
		t.Fatal(err)
	}
	for _, op := range hetero.Ops {
		path, err := model.UserModelPath(op)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, op.String()+": installed "+path) {
			t.Errorf("%s: --force did not install the tuned model:\n%s", op, out)
		}
		if m, err := model.DefaultModel(op); err != nil || m.Info.Path != path {
			t.Errorf("%s: after --force the default lookup gives %v (%v), want %s", op, m, err, path)
		}
	}
	// The models tuned here learnt this machine's own times, unless a
	// head answers with the rule, which is no one machine's, or the
	// system names no processor (a tuned head then records none): a
	// later run says which, and holds a tuned model to a higher bar
	// where it is so (TestTuneVerdict).
	if _, errOut, err = run(t, args...); err != nil {
		t.Fatal(err)
	}
	cpu, err := hetero.Lookup("cpu", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range hetero.Ops {
		m, err := model.DefaultModel(op)
		if err != nil {
			t.Fatal(err)
		}
		note := fmt.Sprintf("note: the %s model in effect learnt from this machine's own times (%s)", op, m.Info.Path)
		ruled := slices.Contains(m.Info.RuleHeads, "cpu")
		want := !ruled && cpu.Info().Model != ""
		if learnt := m.Info.LearntOn(cpu.Info()); learnt != want || strings.Contains(errOut, note) != learnt {
			t.Errorf("%s: the tuned model learnt this CPU (%q): %v, want %v (its cpu head answers with the rule: %v); the run after --force says so: %v\n%s", op, cpu.Info().Model, learnt, want, ruled, strings.Contains(errOut, note), errOut)
		}
	}
	// A tuning at a second rank learns both: the rank-16 rows keep the
	// cpu head, and the rank-8 rows train a head of their own.
	if _, errOut, err = run(t, append(args, "--rank", "8", "--force")...); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "the rows of ranks [8 16], tuned in "+work+" so far, train one head per rank") {
		t.Errorf("a tuning at rank 8 after one at 16 does not say it learns both:\n%s", errOut)
	}
	for _, op := range hetero.Ops {
		m, err := model.DefaultModel(op)
		if err != nil {
			t.Fatal(err)
		}
		at8 := model.RankHead("cpu", 8)
		if want := map[string][]int{"cpu": {16}, at8: {8}}; !reflect.DeepEqual(m.Info.LabelRanks, want) || m.Info.HeadIndex(at8) < 0 {
			t.Errorf("%s: after tunings at ranks 16 and 8, heads %v learnt at %v, want %v", op, m.Info.Heads, m.Info.LabelRanks, want)
		}
	}
	if _, _, err := run(t, "tune-model", "--count", "12"); err == nil || !strings.Contains(err.Error(), "needs --from DIR") {
		t.Errorf("no --from: %v", err)
	}
	if _, _, err := run(t, "tune-model", "--from", from, "--count", "3"); err == nil || !strings.Contains(err.Error(), "--count: expected at least 8") {
		t.Errorf("--count 3: %v", err)
	}
	if _, _, err := run(t, "tune-model", "--from", from, "--rank", "0"); err == nil || !strings.Contains(err.Error(), "--rank: expected at least 1") {
		t.Errorf("--rank 0: %v", err)
	}
	// A budget too short to generate the set: generating stops at 30% of
	// it, labelling at 70%, and the run ends saying what is missing.
	_, stderr, err := run(t, "tune-model", "--from", from, "--count", "12", "--max-nnz", "5000", "--budget", "1ms", "--work", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "larger --budget") || !strings.Contains(stderr, "generating stopped at the budget's 30%") {
		t.Errorf("--budget 1ms: %v; %q", err, stderr)
	}
}

// writeModelWithout writes the model file src to dst without the
// metadata entries keys, each of which src must have: a file as an older
// build wrote it (before files recorded a feature revision, or a
// checksum).
func writeModelWithout(t *testing.T, src, dst string, keys ...string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(data, &mp); err != nil {
		t.Fatal(err)
	}
	n := len(mp.MetadataProps)
	mp.MetadataProps = slices.DeleteFunc(mp.MetadataProps, func(p *onnxpb.StringStringEntryProto) bool {
		return slices.Contains(keys, p.GetKey())
	})
	if len(mp.MetadataProps) != n-len(keys) {
		t.Fatalf("%s lacks one of the metadata entries %v", src, keys)
	}
	if slices.Contains(keys, "sparsetune.packed_trees") {
		// The trees packed where that entry said: a file of a build
		// before them.
		mp.Graph.Initializer = slices.DeleteFunc(mp.Graph.Initializer, func(t *onnxpb.TensorProto) bool {
			return strings.HasPrefix(t.GetName(), "trees_packed_")
		})
	}
	if data, err = proto.Marshal(&mp); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The held-out sources are a quarter of them, and a source keeps its side
// from run to run as rows of new sources are added: a model a run
// installed is never scored on the rows it was tuned on.
func TestHoldOutStable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "holdout.json")
	rowsOf := func(n int) []train.LabelRow {
		var rows []train.LabelRow
		for i := range n {
			for range 3 {
				rows = append(rows, train.LabelRow{Source: fmt.Sprintf("m%02d.mtx", i)})
			}
		}
		return rows
	}
	if _, err := holdOut(path, rowsOf(3), 1); err == nil || !strings.Contains(err.Error(), "the rows have 3 sources") {
		t.Fatalf("3 sources: %v", err)
	}
	var before map[string]bool
	for _, n := range []int{4, 9, 20, 40} {
		held, err := holdOut(path, rowsOf(n), 1)
		if err != nil {
			t.Fatal(err)
		}
		count := 0
		for s, h := range held {
			if h {
				count++
			}
			if was, ok := before[s]; ok && was != h {
				t.Errorf("%d sources: %s moved to held %v", n, s, h)
			}
		}
		if len(held) != n || count != (n+3)/4 {
			t.Errorf("%d sources: %d held out, want %d", n, count, (n+3)/4)
		}
		before = held
	}
	// Another seed, another draw; the same seed and file, the same.
	other, err := holdOut(filepath.Join(t.TempDir(), "h.json"), rowsOf(40), 2)
	if err != nil {
		t.Fatal(err)
	}
	if maps.Equal(other, before) {
		t.Errorf("seeds 1 and 2 hold out the same sources")
	}
}

// TestTuneVerdict: a tuned model replaces the one in effect when it
// scores no worse than the slack below it, or, where the model in effect
// learnt this machine's own times, better by more than the slack; never
// on too few held-out rows.
func TestTuneVerdict(t *testing.T) {
	for _, c := range []struct {
		old, tuned float64
		rows       int
		learnt     bool
		install    bool
		why        string
	}{
		{0.986, 0.985, 228, false, true, ""},
		{0.986, 0.983, 228, false, false, "0.983 against 0.986"},
		{0.986, 0.985, 228, true, false, "learnt from this machine's own times"},
		{0.986, 0.988, 228, true, false, "not above it by more than 0.002"},
		{0.986, 0.989, 228, true, true, ""},
		{0.900, 0.990, 49, false, false, "49 held-out rows are too few"},
		{0.900, 0.990, 49, true, false, "too few"},
	} {
		why := tuneVerdict(c.old, c.tuned, c.rows, c.learnt)
		if (why == "") != c.install || !strings.Contains(why, c.why) {
			t.Errorf("old %.3f, tuned %.3f, %d rows, learnt %v: %q, want install %v (%q)", c.old, c.tuned, c.rows, c.learnt, why, c.install, c.why)
		}
	}
}

// TestTuneLabels: each rank has its own labels file in the work
// directory, resumed by the tunings at that rank (and read by every
// tuning: tuneRows); rank 16's keeps the name of the files tunings wrote
// before --rank.
func TestTuneLabels(t *testing.T) {
	for _, c := range []struct {
		rank int
		want string
	}{
		{16, "labels.jsonl"},
		{64, "labels-r64.jsonl"},
		{4, "labels-r4.jsonl"},
	} {
		if got := tuneLabels("w", c.rank); got != filepath.Join("w", c.want) {
			t.Errorf("rank %d: %s, want %s", c.rank, got, filepath.Join("w", c.want))
		}
	}
}
