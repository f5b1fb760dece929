package model

import (
	"fmt"
	"hash/crc32"
	"strings"

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
// its trees are read when a prediction first needs them, not at load
// (parseTrees): a one-shot process predicting for one device decodes
// one head's trees, not every head's.
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
	var entry []byte
	entry = protowire.AppendTag(entry, fieldStringEntryKey, protowire.BytesType)
	entry = protowire.AppendString(entry, metaChecksum)
	entry = protowire.AppendTag(entry, fieldStringEntryVal, protowire.BytesType)
	entry = protowire.AppendString(entry, checksumOf(data))
	out := make([]byte, 0, len(data)+len(entry)+8)
	out = append(out, data...)
	out = protowire.AppendTag(out, fieldModelMetadata, protowire.BytesType)
	return protowire.AppendBytes(out, entry)
}

// checkSeal reports whether data ends in a checksum entry, and an error
// if the entry does not match the bytes before it or if a checksum entry
// is anywhere but last (where nothing would check what follows it).
func checkSeal(data []byte) (sealed bool, err error) {
	var want string
	at := -1
	err = forEachRawField(data, func(num protowire.Number, typ protowire.Type, v, raw []byte) error {
		if at >= 0 {
			return fmt.Errorf("metadata %s is not the file's last field: the bytes after it would not be checked", metaChecksum)
		}
		if num != fieldModelMetadata || typ != protowire.BytesType {
			return nil
		}
		key, err := stringField(v, fieldStringEntryKey)
		if err != nil || key != metaChecksum {
			return err
		}
		// raw is the last field (the next one is an error), so it ends
		// where data does.
		at = len(data) - len(raw)
		want, err = stringField(v, fieldStringEntryVal)
		return err
	})
	if err != nil {
		return false, err
	}
	if at < 0 {
		return false, nil
	}
	got := checksumOf(data[:at])
	if !strings.EqualFold(want, got) {
		return false, fmt.Errorf("checksum mismatch: the file says %q, its bytes give %q: it was damaged or edited after it was written (write it again: sparsetune train or tune-model)", want, got)
	}
	return true, nil
}

// Seal returns a model file written without a checksum (by a build
// before checksums) with one, after checking the whole file as a load
// of an unsealed file does; a sealed file comes back as it is. name is
// the file's in errors. It cannot tell a file damaged since it was
// written from a sound one: seal only files that have been predicting as
// they should.
func Seal(name string, data []byte) ([]byte, error) {
	m, err := ParseONNX(name, data)
	if err != nil {
		return nil, err
	}
	if m.Info.Sealed {
		return data, nil
	}
	return seal(data), nil
}
