package model

import (
	"fmt"
	"hash/crc32"

	"google.golang.org/protobuf/encoding/protowire"
)

// A model file written by ExportONNX ends in a checksum of the bytes
// before it, so that a file damaged on disk or in transit (a flipped
// weight, a cut tail) fails to load instead of predicting with wrong
// numbers: most such files still parse, and a weight has no range to
// check. The checksum is the file's last field, one more metadata entry
// (ModelProto.metadata_props, which protobuf lets a writer append), whose
// value is "crc32c:" and the CRC-32C of every byte before the entry in
// hex. A file of an older build has none and is loaded as before.
//
// A sealed file's bytes are known to be the ones its writer checked, so
// its load reads only the metadata (parseHeader), and its graph and
// trees are read when a prediction first needs them (ONNXModel.graph,
// headTrees): a one-shot process predicting for one device with its
// trees reads that head's packed trees and nothing of the graph.
const (
	metaChecksum        = "sparsetune.checksum"
	checksumPrefix      = "crc32c:"
	fieldModelMetadata  = 14 // ModelProto.metadata_props
	fieldStringEntryKey = 1  // StringStringEntryProto.key
	fieldStringEntryVal = 2  // StringStringEntryProto.value
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksumOf returns the checksum entry's value for the bytes b.
func checksumOf(b []byte) string {
	return fmt.Sprintf("%s%08x", checksumPrefix, crc32.Checksum(b, castagnoli))
}

// seal returns data with its checksum entry appended.
func seal(data []byte) []byte {
	sum := checksumOf(data)
	out := make([]byte, 0, len(data)+len(metaChecksum)+len(sum)+16)
	return appendMetadata(append(out, data...), metaChecksum, sum)
}

// appendMetadata appends to the model file b one more metadata entry
// (ModelProto.metadata_props, a repeated field a writer may append to).
func appendMetadata(b []byte, key, value string) []byte {
	var entry []byte
	entry = protowire.AppendTag(entry, fieldStringEntryKey, protowire.BytesType)
	entry = protowire.AppendString(entry, key)
	entry = protowire.AppendTag(entry, fieldStringEntryVal, protowire.BytesType)
	entry = protowire.AppendString(entry, value)
	b = protowire.AppendTag(b, fieldModelMetadata, protowire.BytesType)
	return protowire.AppendBytes(b, entry)
}

// Sealing says what Seal added to a file.
type Sealing struct {
	Checksum    bool // the file had none
	PackedTrees bool // its trees were packed for scoring
}

// Seal returns a model file written by an older build in this build's
// layout, after checking the whole file as a load of an unsealed file
// does: with its trees packed for scoring (metaPackedTrees) if it has
// none, and sealed with a checksum; and what it added. A file in that
// layout already comes back as it is, with nothing added. name is the
// file's in errors. It cannot tell a file damaged since it was written
// from a sound one: seal only files that have been predicting as they
// should.
func Seal(name string, data []byte) ([]byte, Sealing, error) {
	m, err := ParseONNX(name, data)
	if err != nil {
		return nil, Sealing{}, err
	}
	if err := m.Check(); err != nil {
		return nil, Sealing{}, err
	}
	in := &m.Info
	body := data
	if in.Sealed {
		body = data[:in.body]
	}
	trees, err := in.AllTrees()
	if err != nil {
		return nil, Sealing{}, err
	}
	var heads []string
	if len(in.PackedTrees) == 0 { // a file of a build before packed trees
		heads = in.TreeHeads
	}
	names, packs := packableHeads(heads, trees)
	added := Sealing{Checksum: !in.Sealed, PackedTrees: len(names) > 0}
	if added == (Sealing{}) {
		return data, added, nil
	}
	if body, err = withPackedTrees(body, names, packs); err != nil {
		return nil, Sealing{}, fmt.Errorf("model %s: %w", name, err)
	}
	return seal(body), added, nil
}
