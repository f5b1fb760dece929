package formats

import "sync"

// A Converter converts one tensor to the MTTKRP formats of any of its
// modes (NewTensorFormat), doing once what the modes' conversions share:
//   - a mode-free format (ModeFree: HiCOO, ALTO) is built on its first
//     use and the same value returned for every mode, so N modes hold one
//     copy of the tensor, not N;
//   - the fiber counts that place every CSF's leaf (CSFOrder) do not
//     depend on the root, so all modes' are counted in one pass, on the
//     first CSF asked for, not once per mode.
//
// The formats it returns are shared: a caller must not change them. A
// Converter is safe for concurrent use.
type Converter struct {
	t *COO

	countOnce sync.Once
	counts    []float64 // fibers with each mode at the leaf

	mu    sync.Mutex
	whole map[string]*conversion
}

// conversion is a mode-free format of the Converter's tensor, made once.
type conversion struct {
	once sync.Once
	f    TensorFormat
	err  error
}

// NewConverter returns a Converter of t, which must not change while the
// Converter is in use.
func NewConverter(t *COO) *Converter { return &Converter{t: t} }

// Format returns the tensor in the named format laid out for an MTTKRP of
// the 0-based mode, as NewTensorFormat does. Mode-free formats are
// converted on the first call and shared after; COO and CSF are new for
// every call.
func (c *Converter) Format(name string, mode int) (TensorFormat, error) {
	if !ModeFree(name) || mode < 0 || mode >= c.t.Order() {
		return newTensorFormat(c.t, name, mode, c.CSFOrder)
	}
	c.mu.Lock()
	if c.whole == nil {
		c.whole = map[string]*conversion{}
	}
	w := c.whole[name]
	if w == nil {
		w = &conversion{}
		c.whole[name] = w
	}
	c.mu.Unlock()
	w.once.Do(func() { w.f, w.err = NewTensorFormat(c.t, name, mode) })
	return w.f, w.err
}

// CSFOrder returns the level order of the CSF rooted at root, the same as
// the package's CSFOrder, from fiber counts made once for every root.
func (c *Converter) CSFOrder(root int) []int {
	order := RootedOrder(c.t.Order(), root)
	if len(order) < 3 || c.t.NNZ() == 0 {
		return order
	}
	c.countOnce.Do(func() {
		c.counts = fiberCounts(c.t, RootedOrder(c.t.Order(), 0))
	})
	counts := make([]float64, len(order)-1)
	for i, m := range order[1:] {
		counts[i] = c.counts[m]
	}
	return leafOrder(order, counts)
}
