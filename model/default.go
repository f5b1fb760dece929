package model

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sparsetune/sparsetune/hetero"
)

// The models sparsetune uses when none is named: one per op, trained on
// labels measured on a 2-core x86 VM (docs/model.md has the report;
// default/README.md says how to rebuild them).
//
// They are byte slices rather than an embed.FS, whose ReadFile copies:
// a one-shot process would fault in a heap copy of 1.6 MB it only reads
// (0.7 ms of a 10 ms load). The slices are only read.
var (
	//go:embed default/mttkrp.onnx
	defaultMTTKRP []byte
	//go:embed default/ttm.onnx
	defaultTTM []byte
)

// ErrNoDefault is wrapped by DefaultModel when no model exists for an op.
var ErrNoDefault = errors.New("no default model")

// UserModelPath returns where a user's own default model for op lives:
// MODEL.OP.onnx in the sparsetune user config directory, written by
// sparsetune tune-model (or by hand). It wins over the embedded one.
func UserModelPath(op hetero.Op) (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "sparsetune", "model."+op.String()+".onnx"), nil
}

// DefaultModel returns the model for op that sparsetune uses when none is
// named: the user's own (UserModelPath) when there is one, else the
// embedded one. Labels belong to hardware, so the embedded model has a
// head only for the device classes it was trained on; a device of another
// class gets ErrNoHead from a prediction and is measured instead.
//
// A user's model trained on features of another revision than this
// build's gives an error wrapping a *FeatureRevisionError, which says to
// retrain it: sparsetune tune-model does, from EmbeddedModel.
func DefaultModel(op hetero.Op) (*ONNXModel, error) {
	if path, err := UserModelPath(op); err == nil {
		if _, err := os.Stat(path); err == nil {
			return LoadONNX(path)
		}
	}
	return EmbeddedModel(op)
}

// EmbeddedModel returns the model for op embedded in this build, whatever
// the user's own.
func EmbeddedModel(op hetero.Op) (*ONNXModel, error) {
	name := "default/" + op.String() + ".onnx"
	var data []byte
	switch op {
	case hetero.MTTKRP:
		data = defaultMTTKRP
	case hetero.SpTTM:
		data = defaultTTM
	}
	if data == nil {
		return nil, fmt.Errorf("%w for %s", ErrNoDefault, op)
	}
	// The embedded bytes are part of the executable, whose own
	// integrity is the system's to keep: their checksum is not computed,
	// which would read every byte (1.5 ms of a one-shot command). The
	// tests check it, and the packed trees that are scored unchecked
	// (TestEmbeddedModelsWhole).
	m, err := parseONNX("embedded:"+name, data, true)
	if err != nil {
		return nil, err
	}
	if m.Info.Op != op.String() {
		return nil, fmt.Errorf("embedded %s predicts for %s, not %s", name, m.Info.Op, op)
	}
	return m, nil
}
