package model

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/model/onnxpb"
)

// GCN returns the network of the model file as a GCN that training can
// start from (fine-tuning: sparsetune tune-model). It undoes what
// ExportONNX folds into the file's initializers: the layers' constant
// scales, W1's global-term correction, the inverse standard deviations
// and the readout scales in each head's first matrix. The weights come
// back at the file's float32 precision.
func (m *ONNXModel) GCN() (*GCN, error) {
	if err := m.graph(); err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Info.Path, err)
	}
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(m.network, &mp); err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Info.Path, err)
	}
	in := &m.Info
	trees, err := in.AllTrees()
	if err != nil {
		return nil, err
	}
	c := Config{Op: in.Op, Budget: in.Budget, Hidden: in.Hidden, MLP: in.MLP, Heads: slices.Clone(in.Heads)}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("model %s: %w", in.Path, err)
	}
	g := &GCN{Config: c, TrainMin: in.TrainMin, TrainMax: in.TrainMax, RuleHeads: slices.Clone(in.RuleHeads), Trees: trees, BlendMargins: maps.Clone(in.BlendMargins), CPUInnerLoops: slices.Clone(in.CPUInnerLoops), CPUModels: maps.Clone(in.CPUModels), LabelRanks: maps.Clone(in.LabelRanks)}
	_, _, n := c.views(nil)
	g.Params = make([]float64, n)
	layers, heads, _ := c.views(g.Params)
	inits := map[string]*onnxpb.TensorProto{}
	for _, t := range mp.Graph.Initializer {
		inits[t.GetName()] = t
	}
	get := func(name string, want int) ([]float32, error) {
		t := inits[name]
		if t == nil {
			return nil, fmt.Errorf("model %s: no initializer %s (not written by this build's export?)", in.Path, name)
		}
		if len(t.FloatData) != want {
			return nil, fmt.Errorf("model %s: initializer %s has %d values, the config needs %d", in.Path, name, len(t.FloatData), want)
		}
		return t.FloatData, nil
	}
	set := func(dst matrix, name string, scale float64) error {
		d, err := get(name, len(dst.d))
		if err != nil {
			return err
		}
		for i, v := range d {
			dst.d[i] = float64(v) * scale
		}
		return nil
	}
	br, bc := float64(c.Budget.Rows), float64(c.Budget.Cols)
	nn := br + bc
	for l, w := range layers {
		p := fmt.Sprintf("layer%d_", l+1)
		// Exported: W3/N, W2/Bc, W1 − W3/N, the bias as it is.
		if err := set(w.w3, p+"w3", nn); err != nil {
			return nil, err
		}
		if err := set(w.w2, p+"w2_for_rows", bc); err != nil {
			return nil, err
		}
		if err := set(w.b, p+"bias", 1); err != nil {
			return nil, err
		}
		for _, part := range []struct {
			dst  matrix
			name string
		}{{w.w1r, p + "w1_rows"}, {w.w1c, p + "w1_cols"}} {
			if err := set(part.dst, part.name, 1); err != nil {
				return nil, err
			}
			for i, v := range w.w3.d {
				part.dst.d[i] += v / nn
			}
		}
	}
	mean, err := get("global_mean", features.Count)
	if err != nil {
		return nil, err
	}
	invStd, err := get("global_inv_std", features.Count)
	if err != nil {
		return nil, err
	}
	for i := range features.Count {
		g.Mean[i], g.Std[i] = float64(mean[i]), 1/float64(invStd[i])
	}
	h := c.Hidden
	for k, w := range heads {
		p := "head_" + c.Heads[k].Name + "_"
		if err := set(w.m1, p+"m1", 1); err != nil {
			return nil, err
		}
		// Exported M1 has the readouts' 1/Br and 1/Bc in its first 4H rows.
		for i := range 4 * h {
			s := br
			if (i/h)%2 == 1 {
				s = bc
			}
			for j := range c.MLP[0] {
				w.m1.d[i*c.MLP[0]+j] *= s
			}
		}
		for _, part := range []struct {
			dst  matrix
			name string
		}{{w.c1, p + "c1"}, {w.m2, p + "m2"}, {w.c2, p + "c2"}, {w.m3, p + "m3"}, {w.c3, p + "c3"}} {
			if err := set(part.dst, part.name, 1); err != nil {
				return nil, err
			}
		}
	}
	return g, nil
}

// StartFrom copies into g what src learnt that fits g's architecture,
// for fine-tuning: the graph layers and the feature standardisation when
// the budget and widths match, and each head of g whose name and classes
// a head of src has. A cpu head of g with no namesake in src starts from
// the head src would answer with on g's hardware (Info.HeadFor with g's
// CPUInnerLoops and the processor of its CPUModels), when its classes are
// the same: a "cpu" head tuned on an AVX2 machine starts from a default
// model's "cpu/avx2+pext", on an Intel one from "cpu/avx512+pext/intel". The
// training range becomes the union of both. It returns the heads copied;
// none when the architectures differ (g is left as it was).
func (g *GCN) StartFrom(src *GCN) []string {
	a, b := g.Config, src.Config
	if a.Op != b.Op || a.Budget != b.Budget || a.Hidden != b.Hidden || a.MLP != b.MLP {
		return nil
	}
	gl, gh, _ := a.views(g.Params)
	sl, sh, _ := b.views(src.Params)
	for l := range gl {
		for _, p := range [][2]matrix{{gl[l].w1r, sl[l].w1r}, {gl[l].w1c, sl[l].w1c}, {gl[l].w2, sl[l].w2}, {gl[l].w3, sl[l].w3}, {gl[l].b, sl[l].b}} {
			copy(p[0].d, p[1].d)
		}
	}
	g.Mean, g.Std = src.Mean, src.Std
	for i := range g.TrainMin {
		g.TrainMin[i], g.TrainMax[i] = min(g.TrainMin[i], src.TrainMin[i]), max(g.TrainMax[i], src.TrainMax[i])
	}
	var copied []string
	for k, h := range a.Heads {
		j := slices.IndexFunc(b.Heads, func(o Head) bool { return o.Name == h.Name })
		if j < 0 && IsCPUHead(h.Name) && len(g.CPUInnerLoops) == 1 {
			j, _ = headFor(b.Heads, src.CPUInnerLoops, h.Name, g.CPUInnerLoops[0], oneFamily(g.CPUModels[h.Name]))
		}
		if j < 0 || !slices.Equal(b.Heads[j].Classes, h.Classes) {
			continue
		}
		for _, p := range [][2]matrix{{gh[k].m1, sh[j].m1}, {gh[k].c1, sh[j].c1}, {gh[k].m2, sh[j].m2}, {gh[k].c2, sh[j].c2}, {gh[k].m3, sh[j].m3}, {gh[k].c3, sh[j].c3}} {
			copy(p[0].d, p[1].d)
		}
		copied = append(copied, h.Name)
	}
	return copied
}

// oneFamily returns the family (CPUFamily) of processors when they are
// all of one, else "".
func oneFamily(processors []string) string {
	var family string
	for i, p := range processors {
		f := CPUFamily(p)
		if i > 0 && f != family {
			return ""
		}
		family = f
	}
	return family
}
