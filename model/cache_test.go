package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
)

// cacheTensor is a tensor past features.ExactNNZ, so that its summary
// samples it.
func cacheTensor(seed uint64) *formats.COO {
	rng := rand.New(rand.NewPCG(seed, seed))
	x, _ := formats.NewCOO([]int{300, 200, 100}, 100_000)
	for range 100_000 {
		x.Append([]uint32{uint32(rng.IntN(300)), uint32(rng.IntN(200)), uint32(rng.IntN(100))}, 1)
	}
	return x
}

func idOf(t *testing.T, x *formats.COO) *TensorID {
	t.Helper()
	s, err := features.Summarize(x)
	if err != nil {
		t.Fatal(err)
	}
	return NewTensorID(x, s)
}

// TestDecisionsByKey: decisions are filed under the sample's key; a
// tensor that shares the key but not the fingerprint (it differs outside
// its sample) does not get another's decision; a miss never reads the
// whole tensor; a decision without its key or fingerprint is refused.
func TestDecisionsByKey(t *testing.T) {
	x := cacheTensor(1)
	sampled := features.PickPositions(x.NNZ())
	if len(sampled) == 0 {
		t.Fatal("the tensor is read whole: no sample")
	}
	// y is x with one nonzero outside the sample moved.
	y := &formats.COO{Dims: x.Dims, Inds: slices.Clone(x.Inds), Vals: x.Vals}
	y.Inds[2] = slices.Clone(x.Inds[2])
	at := 0
	for ; slices.Contains(sampled, uint64(at)); at++ {
	}
	y.Inds[2][at] = (y.Inds[2][at] + 1) % 100
	ix, iy, iz := idOf(t, x), idOf(t, y), idOf(t, cacheTensor(2))
	if ix.Key != iy.Key || ix.Fingerprint() == iy.Fingerprint() || ix.Key == iz.Key {
		t.Fatalf("keys %s %s %s: want x and y alike, z apart; fingerprints of x and y alike: %v", ix.Key[:8], iy.Key[:8], iz.Key[:8], ix.Fingerprint() == iy.Fingerprint())
	}
	dec := &Decisions{Dir: t.TempDir()}
	d := &Decision{Key: ix.Key, Fingerprint: ix.Fingerprint(), Op: "mttkrp", Mode: 1, Device: "cpu", Predictor: "measure",
		Prediction: &Prediction{Formats: []Ranked{{Format: "alto", Score: 1}}}}
	if err := dec.Put(d, hetero.MTTKRP, 0); err != nil {
		t.Fatal(err)
	}
	if got, ok := dec.Get(ix, hetero.MTTKRP, 0, "cpu", "measure"); !ok || got.Prediction.Best() != "alto" {
		t.Fatalf("x: %v, %v", got, ok)
	}
	if _, ok := dec.Get(iy, hetero.MTTKRP, 0, "cpu", "measure"); ok {
		t.Fatal("y got x's decision: same sample, another tensor")
	}
	fresh := idOf(t, cacheTensor(2))
	if _, ok := dec.Get(fresh, hetero.MTTKRP, 0, "cpu", "measure"); ok || fresh.fp != "" {
		t.Fatalf("z: hit %v, fingerprint computed %v: a miss must not read the whole tensor", ok, fresh.fp != "")
	}
	if _, ok := dec.Get(ix, hetero.MTTKRP, 1, "cpu", "measure"); ok {
		t.Fatal("a decision for mode 1 given for mode 2")
	}
	for _, bad := range []*Decision{{Fingerprint: d.Fingerprint, Prediction: d.Prediction}, {Key: d.Key, Prediction: d.Prediction}} {
		if err := dec.Put(bad, hetero.MTTKRP, 0); err == nil {
			t.Errorf("decision with key %q and fingerprint %q stored", bad.Key, bad.Fingerprint)
		}
	}
}

// TestDecisionPath: the cache's file names stay as they were filed, so
// that decisions measured by an earlier build are found.
func TestDecisionPath(t *testing.T) {
	d := &Decisions{Dir: "/c"}
	key := "0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		op                hetero.Op
		mode              int
		device, predictor string
		want              string
	}{
		{hetero.MTTKRP, 0, "cpu", "measure", "/c/0123456789abcdef0123456789abcdef-mttkrp-mode1-cpu-measure.json"},
		{hetero.SpTTM, 2, "cuda:0", "measure-greedy", "/c/0123456789abcdef0123456789abcdef-ttm-mode3-cuda:0-measure-greedy.json"},
		{hetero.SpTTM, 11, "opencl:1", "gcn", "/c/0123456789abcdef0123456789abcdef-ttm-mode12-opencl:1-gcn.json"},
	} {
		if got := d.path(key, tc.op, tc.mode, tc.device, tc.predictor); got != tc.want {
			t.Errorf("%s mode %d %s %s: %s, want %s", tc.op, tc.mode+1, tc.device, tc.predictor, got, tc.want)
		}
	}
}

// A cache file whose ranking is not one of the op's formats, each once,
// is no decision: a run would take its first format as it is.
func TestDecisionsRefuseBadRankings(t *testing.T) {
	x := cacheTensor(3)
	id := idOf(t, x)
	dec := &Decisions{Dir: t.TempDir()}
	for _, c := range []struct {
		name string
		r    []Ranked
		ok   bool
	}{
		{"good", []Ranked{{"csf", 1}, {"coo", 0.5}}, true},
		{"unknown format", []Ranked{{"zzz", 1}, {"coo", 0.5}}, false},
		{"another op's", []Ranked{{"csr", 1}}, false},
		{"twice", []Ranked{{"coo", 1}, {"coo", 0.5}}, false},
		{"none", nil, false},
	} {
		// Written by hand: the file stands for one edited, or written by
		// another build.
		d := &Decision{Key: id.Key, Fingerprint: id.Fingerprint(), Op: "mttkrp", Mode: 1, Device: "cpu", Predictor: "measure",
			Prediction: &Prediction{Formats: c.r}}
		data, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dec.path(id.Key, hetero.MTTKRP, 0, "cpu", "measure"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok := dec.Get(id, hetero.MTTKRP, 0, "cpu", "measure"); ok != c.ok {
			t.Errorf("%s: used %v, want %v", c.name, ok, c.ok)
		}
	}
}

// TestSampleKeyBytes: the key is the SHA-256 of the bytes its comment
// names, written out here one by one, so that a key stays what the
// decisions already cached were filed under (the sample here holds more
// indices than SampleKey's buffer).
func TestSampleKeyBytes(t *testing.T) {
	s, err := features.Summarize(cacheTensor(3))
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Sample.NNZ() * len(s.Dims); n <= 1024 {
		t.Fatalf("a sample of %d indices fills no buffer", n)
	}
	var b []byte
	for _, v := range append([]int{len(s.Dims)}, append(slices.Clone(s.Dims), s.NNZ, s.Sample.NNZ())...) {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	for _, ind := range s.Sample.Inds {
		for _, i := range ind {
			b = binary.LittleEndian.AppendUint32(b, i)
		}
	}
	sum := sha256.Sum256(b)
	if got, want := SampleKey(s), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("SampleKey %s, the hash of its bytes %s", got, want)
	}
}

func BenchmarkSampleKey(b *testing.B) {
	s, err := features.Summarize(cacheTensor(3))
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d sampled nonzeros", s.Sample.NNZ())
	for b.Loop() {
		SampleKey(s)
	}
}

// TestDecisionsEmpty: a cache whose directory is missing or empty holds
// nothing; one decision stored makes it hold something, seen by another
// Decisions on the same directory (another process's).
func TestDecisionsEmpty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "decisions")
	dec := &Decisions{Dir: dir}
	if !dec.Empty() {
		t.Fatal("a missing directory is not empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if !dec.Empty() {
		t.Fatal("an empty directory is not empty")
	}
	id := idOf(t, cacheTensor(1))
	d := &Decision{Key: id.Key, Fingerprint: id.Fingerprint(), Op: "mttkrp", Mode: 1, Device: "cpu", Predictor: "measure",
		Prediction: &Prediction{Formats: []Ranked{{Format: "alto", Score: 1}}}}
	if err := dec.Put(d, hetero.MTTKRP, 0); err != nil {
		t.Fatal(err)
	}
	if (&Decisions{Dir: dir}).Empty() {
		t.Fatal("a directory with a decision is empty")
	}
}
