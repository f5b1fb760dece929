package kernels

import "fmt"

// The elementwise operations of the format predictor's network (its
// layers' sums, ReLU and masks), on the vector units where there are any:
// the portable loop costs about a nanosecond per float, as much as the
// network's products once those are vectorised (docs/model.md).

// elementwiseOp names an operation for the vector loops.
type elementwiseOp uint8

const (
	opAdd elementwiseOp = iota
	opSub
	opMul
	opRelu
)

// Add sets dst[i] = x[i] + y[i] for i < len(dst). It panics if x or y is
// shorter than dst.
func Add(dst, x, y []float32) { elementwise(opAdd, dst, x, y) }

// Sub sets dst[i] = x[i] - y[i] for i < len(dst). It panics if x or y is
// shorter than dst.
func Sub(dst, x, y []float32) { elementwise(opSub, dst, x, y) }

// Mul sets dst[i] = x[i] · y[i] for i < len(dst). It panics if x or y is
// shorter than dst.
func Mul(dst, x, y []float32) { elementwise(opMul, dst, x, y) }

// Relu sets dst[i] = max(x[i], 0) for i < len(dst); a NaN stays NaN. It
// panics if x is shorter than dst.
func Relu(dst, x []float32) { elementwise(opRelu, dst, x, x) }

func elementwise(op elementwiseOp, dst, x, y []float32) {
	if len(x) < len(dst) || len(y) < len(dst) {
		panic(fmt.Sprintf("kernels: elementwise operation on %d floats from %d and %d", len(dst), len(x), len(y)))
	}
	i := elementwiseVec(op, dst, x, y)
	dst, x, y = dst[i:], x[i:len(dst)], y[i:len(dst)]
	switch op {
	case opAdd:
		for j := range dst {
			dst[j] = x[j] + y[j]
		}
	case opSub:
		for j := range dst {
			dst[j] = x[j] - y[j]
		}
	case opMul:
		for j := range dst {
			dst[j] = x[j] * y[j]
		}
	default:
		for j, v := range x {
			dst[j] = max(v, 0)
		}
	}
}
