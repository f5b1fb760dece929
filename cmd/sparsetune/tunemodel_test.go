package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/model"
)

// TestTuneModel: the whole adaptation on a tiny generated set: generate,
// label on the CPU, hold out, fine-tune, print before and after, and
// install each op's model where it scores no worse (a file the default
// lookup then loads), or say it kept the old one. A second run resumes:
// it labels nothing new.
func TestTuneModel(t *testing.T) {
	from := filepath.Join(dataDir, "suitesparse")
	if _, err := os.Stat(from); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	work := t.TempDir()
	args := []string{"tune-model", "--from", from, "--count", "12", "--max-nnz", "5000", "--budget", "2m", "--work", work}
	out, _, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
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
		if installed == kept {
			t.Errorf("%s: installed %v, kept %v: want exactly one\n%s", op, installed, kept, out)
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
	if _, _, err := run(t, args...); err != nil {
		t.Fatal(err)
	}
	if again, err := os.ReadFile(labels); err != nil || string(again) != string(first) {
		t.Errorf("a second run changed the labels (%d bytes, then %d; %v): it should resume and find every row done", len(first), len(again), err)
	}
	if _, _, err := run(t, "tune-model", "--count", "12"); err == nil || !strings.Contains(err.Error(), "needs --from DIR") {
		t.Errorf("no --from: %v", err)
	}
	if _, _, err := run(t, "tune-model", "--from", from, "--count", "3"); err == nil || !strings.Contains(err.Error(), "--count: expected at least 8") {
		t.Errorf("--count 3: %v", err)
	}
}
