// Package onnxpb holds the Go types of the ONNX protobuf schema, used to
// write and read sparsetune's model files.
//
// onnx.pb.go is generated, not written: from onnx.proto of ONNX 1.12.0 (as
// Debian 12's python3-onnx installs it, /usr/lib/python3/dist-packages/
// onnx/onnx.proto), with its package line renamed from "onnx" to
// "sparsetune.onnx" so that its registration does not clash with the copy
// onnx-go registers under "onnx" (protobuf package names never reach the
// wire, so the files are standard ONNX), by protoc 3.21.12 (Debian's
// protobuf-compiler) and protoc-gen-go v1.36.11:
//
//	mkdir -p /tmp/onnxgen/sparsetune && cd /tmp/onnxgen
//	sed 's/^package onnx;/package sparsetune.onnx;/' \
//		/usr/lib/python3/dist-packages/onnx/onnx.proto > sparsetune/onnx.proto
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
//	protoc -I . --go_out=. --go_opt=paths=source_relative \
//		--go_opt=Msparsetune/onnx.proto=github.com/sparsetune/sparsetune/model/onnxpb \
//		sparsetune/onnx.proto
//	mv sparsetune/onnx.pb.go $REPO/model/onnxpb/
package onnxpb
