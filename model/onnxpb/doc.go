// Package onnxpb holds the Go types of the ONNX protobuf schema, used to
// write and read sparsetune's model files.
//
// onnx.pb.go is generated, not written: from onnx.proto of ONNX 1.12.0 (as
// Debian 12's python3-onnx installs it, /usr/lib/python3/dist-packages/
// onnx/onnx.proto), with its package line renamed from "onnx" to
// "sparsetune.onnx" so that its registration does not clash with the copy
// onnx-go registers under "onnx" (protobuf package names never reach the
// wire, so the files are standard ONNX), and AttributeProto's floats and
// ints marked [packed = true], by protoc 3.21.12 (Debian's
// protobuf-compiler) and protoc-gen-go v1.36.11.
//
// Packing is a writer's choice that every protobuf reader must accept
// (onnx, onnx-go and this module's readers do). It matters for the
// boosted trees: a TreeEnsembleClassifier holds its node ids as int
// lists, and written unpacked, with a tag per element, they made the
// embedded model file a fifth larger and slower to read.
//
//	mkdir -p /tmp/onnxgen/sparsetune && cd /tmp/onnxgen
//	sed -e 's/^package onnx;/package sparsetune.onnx;/' \
//		-e 's/^\(  repeated float floats = 7\);/\1 [packed = true];/' \
//		-e 's/^\(  repeated int64 ints = 8\);/\1 [packed = true];/' \
//		/usr/lib/python3/dist-packages/onnx/onnx.proto > sparsetune/onnx.proto
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
//	protoc -I . --go_out=. --go_opt=paths=source_relative \
//		--go_opt=Msparsetune/onnx.proto=github.com/sparsetune/sparsetune/model/onnxpb \
//		sparsetune/onnx.proto
//	mv sparsetune/onnx.pb.go $REPO/model/onnxpb/
package onnxpb
