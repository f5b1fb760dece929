package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/atomicfile"
)

// Fingerprint identifies a tensor's structure: a SHA-256 over its dims,
// nonzero count and index arrays (not its values, which do not change the
// best format). The same file read twice has the same fingerprint.
func Fingerprint(x *formats.COO) string {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(len(x.Dims)))
	h.Write(b[:])
	for _, d := range x.Dims {
		binary.LittleEndian.PutUint64(b[:], uint64(d))
		h.Write(b[:])
	}
	binary.LittleEndian.PutUint64(b[:], uint64(x.NNZ()))
	h.Write(b[:])
	for _, ind := range x.Inds {
		hashWords(h, ind)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// littleEndianHost says whether the host stores a word's low byte first,
// as Fingerprint hashes the indices.
var littleEndianHost = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// hashWords writes a's words to h as little-endian bytes: in place on a
// little-endian host (amd64, arm64, riscv64, ...), through a buffer on a
// big-endian one (s390x), so that a tensor has one fingerprint, which
// labels files and decision caches record, on every host.
func hashWords(h hash.Hash, a []uint32) {
	if len(a) == 0 {
		return
	}
	if littleEndianHost {
		h.Write(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), 4*len(a)))
		return
	}
	var buf [4096]byte
	for len(a) > 0 {
		k := min(len(a), len(buf)/4)
		for j, v := range a[:k] {
			binary.LittleEndian.PutUint32(buf[4*j:], v)
		}
		h.Write(buf[:4*k])
		a = a[k:]
	}
}

// SampleKey names a tensor in the decision cache, cheaply: a SHA-256 over
// its dims, its nonzero count and the indices of its summary's sample
// (features.Summary), which depend on the tensor alone.
//
// Why not the Fingerprint: it reads every index, about 9 ms at 1.4 M
// nonzeros on the 2-core VM, several times the kernel whose format the
// cache would give, and a tensor never seen finds nothing in the cache
// for it. The key reads the sample, which a decision reads anyway.
// Tensors that differ only outside their samples share a key;
// Decisions.Get tells them apart by their Fingerprint, computed only when
// a decision is filed under the key.
func SampleKey(s *features.Summary) string {
	h := sha256.New()
	var b [8]byte
	word := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	word(uint64(len(s.Dims)))
	for _, d := range s.Dims {
		word(uint64(d))
	}
	word(uint64(s.NNZ))
	word(uint64(s.Sample.NNZ()))
	// The indices go to the hash a mode at a time (hashWords), not a
	// Write per index, which took twice as long (BenchmarkSampleKey).
	for _, ind := range s.Sample.Inds {
		hashWords(h, ind)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// A TensorID is what the decision cache knows a tensor by: its SampleKey,
// and its Fingerprint, computed on first use.
type TensorID struct {
	Key string

	x    *formats.COO
	once sync.Once
	fp   string
}

// NewTensorID returns x's ID; s is x's summary.
func NewTensorID(x *formats.COO, s *features.Summary) *TensorID {
	return &TensorID{Key: SampleKey(s), x: x}
}

// Fingerprint returns Fingerprint of the tensor, computing it once.
func (id *TensorID) Fingerprint() string {
	id.once.Do(func() { id.fp = Fingerprint(id.x) })
	return id.fp
}

// Decisions caches tuning decisions on disk, one JSON file per tensor
// (its SampleKey), op, mode, device and predictor, so a tensor tuned once
// is not measured again. A file holds the tensor's Fingerprint too: a
// decision is given back only to the tensor it was made for.
type Decisions struct{ Dir string }

// DefaultDecisions caches in the user cache directory
// ($XDG_CACHE_HOME/sparsetune/decisions, usually ~/.cache/...).
func DefaultDecisions() (*Decisions, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return nil, fmt.Errorf("decision cache: %w", err)
	}
	return &Decisions{Dir: filepath.Join(dir, "sparsetune", "decisions")}, nil
}

// Decision is a cached answer.
type Decision struct {
	Key         string      `json:"key"` // the tensor's SampleKey, which names the file
	Fingerprint string      `json:"fingerprint"`
	Op          string      `json:"op"`
	Mode        int         `json:"mode"` // 1-based
	Device      string      `json:"device"`
	Predictor   string      `json:"predictor"`
	Prediction  *Prediction `json:"prediction"`
}

// path returns the file a decision is filed in: the key's first 32 hex
// digits, op, mode, device and predictor. The name is concatenated, not
// formatted: in a one-shot process fmt.Sprintf's first call, through an
// op's String method, took 10-18 µs of the engine's decision.
func (d *Decisions) path(key string, op hetero.Op, mode int, device, predictor string) string {
	return filepath.Join(d.Dir, key[:32]+"-"+op.String()+"-mode"+strconv.Itoa(mode+1)+"-"+filepath.Base(device)+"-"+predictor+".json")
}

// Empty reports whether the cache holds no decision at all: its
// directory is missing or has no entry. A caller asks it before it
// computes a tensor's key, which costs a pass over the sample's indices
// through SHA-256: a miss in an empty cache then costs one failed open
// (the engine's first decision, in a one-shot process on 1-2 M nonzeros:
// about 0.2 ms, of which the key and the files looked for were 20-40
// µs). It reads the directory each time, so decisions another process
// stores are seen.
func (d *Decisions) Empty() bool {
	f, err := os.Open(d.Dir)
	if err != nil {
		return true
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}

// Get returns the cached decision for the tensor id names, if any. The
// tensor's Fingerprint is computed only when a file is filed under its
// key. A cache file that cannot be read as a decision for this tensor is
// treated as absent.
func (d *Decisions) Get(id *TensorID, op hetero.Op, mode int, device, predictor string) (*Decision, bool) {
	data, err := os.ReadFile(d.path(id.Key, op, mode, device, predictor))
	if err != nil {
		return nil, false
	}
	var dec Decision
	if json.Unmarshal(data, &dec) != nil || dec.Key != id.Key || dec.Prediction == nil || !validRanking(dec.Prediction.Formats, op) || dec.Fingerprint != id.Fingerprint() {
		return nil, false
	}
	return &dec, true
}

// validRanking reports whether r ranks formats of op, each once, with
// finite scores: what a cache file must hold to be used, since a run
// would take its first format as it is.
func validRanking(r []Ranked, op hetero.Op) bool {
	if len(r) == 0 {
		return false
	}
	seen := map[string]bool{}
	for _, f := range r {
		if !slices.Contains(op.Formats(), f.Format) || seen[f.Format] || math.IsNaN(f.Score) || math.IsInf(f.Score, 0) {
			return false
		}
		seen[f.Format] = true
	}
	return true
}

// Put stores a decision, filed under its Key, through a temporary file
// and a rename so readers never see half a file. It needs the Key and the
// Fingerprint (TensorID gives both).
func (d *Decisions) Put(dec *Decision, op hetero.Op, mode int) error {
	if len(dec.Key) < 32 || dec.Fingerprint == "" {
		return fmt.Errorf("decision cache: a decision needs its tensor's key and fingerprint")
	}
	if err := os.MkdirAll(d.Dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("decision cache: %w", err)
	}
	data, err := json.MarshalIndent(dec, "", "  ")
	if err != nil {
		return err
	}
	path := d.path(dec.Key, op, mode, dec.Device, dec.Predictor)
	err = atomicfile.WriteBytes(path, data)
	if err != nil {
		return fmt.Errorf("decision cache: %w", err)
	}
	return nil
}
