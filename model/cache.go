package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"

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
		if len(ind) > 0 {
			// Index arrays hashed in place: little-endian on every platform
			// sparsetune builds for (amd64, arm64).
			h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&ind[0])), 4*len(ind)))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Decisions caches tuning decisions on disk, one JSON file per tensor
// fingerprint, op, mode and device, so a tensor tuned once is not measured
// again.
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
	Fingerprint string      `json:"fingerprint"`
	Op          string      `json:"op"`
	Mode        int         `json:"mode"` // 1-based
	Device      string      `json:"device"`
	Predictor   string      `json:"predictor"`
	Prediction  *Prediction `json:"prediction"`
}

func (d *Decisions) path(fp string, op hetero.Op, mode int, device, predictor string) string {
	return filepath.Join(d.Dir, fmt.Sprintf("%s-%s-mode%d-%s-%s.json", fp[:32], op, mode+1, filepath.Base(device), predictor))
}

// Get returns the cached decision, if any. A cache file that cannot be
// read as a decision for this key is treated as absent.
func (d *Decisions) Get(fp string, op hetero.Op, mode int, device, predictor string) (*Decision, bool) {
	data, err := os.ReadFile(d.path(fp, op, mode, device, predictor))
	if err != nil {
		return nil, false
	}
	var dec Decision
	if json.Unmarshal(data, &dec) != nil || dec.Fingerprint != fp || dec.Prediction == nil || len(dec.Prediction.Formats) == 0 {
		return nil, false
	}
	return &dec, true
}

// Put stores a decision, through a temporary file and a rename so readers
// never see half a file.
func (d *Decisions) Put(dec *Decision, op hetero.Op, mode int) error {
	if err := os.MkdirAll(d.Dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("decision cache: %w", err)
	}
	data, err := json.MarshalIndent(dec, "", "  ")
	if err != nil {
		return err
	}
	path := d.path(dec.Fingerprint, op, mode, dec.Device, dec.Predictor)
	err = atomicfile.Write(path, func(w io.Writer) error { _, err := w.Write(data); return err })
	if err != nil {
		return fmt.Errorf("decision cache: %w", err)
	}
	return nil
}
