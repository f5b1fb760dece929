package sample

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
)

var update = flag.Bool("update", false, "rewrite ratings.tns from Generate")

// TestEmbeddedIsGenerated proves the embedded file is Generate's output, so
// the sample is reproducible rather than hand-made.
func TestEmbeddedIsGenerated(t *testing.T) {
	var buf bytes.Buffer
	if err := formats.WriteTNS(&buf, Generate()); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("ratings.tns", buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(buf.Bytes(), tns) {
		t.Fatal("ratings.tns differs from Generate(); run go test ./internal/sample -update")
	}
	x, err := Tensor()
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Validate(); err != nil {
		t.Fatal(err)
	}
	if !x.Equal(Generate()) {
		t.Fatal("parsed sample differs from Generate()")
	}
}
