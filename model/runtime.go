package model

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	onnx "github.com/owulveryck/onnx-go"
	"github.com/owulveryck/onnx-go/backend/x/gorgonnx"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/graphenc"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/model/onnxpb"
)

// Info is what a model file says about itself: its metadata, checked
// against its graph (a sealed file's when the graph is first read:
// ONNXModel.Check reads it).
type Info struct {
	Path          string          `json:"path"`
	FormatVersion int             `json:"format_version"`
	IRVersion     int64           `json:"ir_version"`
	Opset         int64           `json:"opset"`
	Op            string          `json:"op"`
	Budget        graphenc.Budget `json:"budget"`
	Hidden        int             `json:"hidden"`
	MLP           [2]int          `json:"mlp"`
	Heads         []Head          `json:"heads"`
	Features      []string        `json:"features"`
	// FeatureRevision is the features.Revision the model was trained on.
	FeatureRevision int             `json:"feature_revision"`
	NodeFeatures    []string        `json:"node_features"`
	Mean            features.Vector `json:"feature_mean"`
	Std             features.Vector `json:"feature_std"`
	TrainMin        features.Vector `json:"train_min"`
	TrainMax        features.Vector `json:"train_max"`
	// RuleHeads are the heads that defer to the hand rule (GCN.RuleHeads).
	RuleHeads []string `json:"rule_heads,omitempty"`
	// TreeHeads are the heads answered by boosted trees (GCN.Trees), in
	// head order; Trees returns the trees of each. TreeNodes counts their
	// nodes once every head's trees are read: at load, for a file without
	// a checksum, else by AllTrees.
	TreeHeads []string `json:"tree_heads,omitempty"`
	TreeNodes int      `json:"tree_nodes,omitempty"`
	// PackedTrees are the heads whose trees the file also carries laid
	// out for scoring (metaPackedTrees), which a prediction reads where
	// they lie; files of builds before them have none.
	PackedTrees []string `json:"packed_trees,omitempty"`
	// Sealed says that the file ends in a checksum of its bytes, which
	// matched (ExportONNX writes one; a file of an older build has none).
	Sealed bool     `json:"sealed"`
	body   int      // the file's length before its checksum
	trees  *treeSet // shared by copies of the Info
	// BlendMargins are the heads with trees that ask the network too
	// when the trees are unsure, and how sure is sure (GCN.BlendMargins).
	BlendMargins map[string]float64 `json:"blend_margins,omitempty"`
	// CPUInnerLoops are the inner loops of the builds that measured the
	// cpu head's labels (GCN.CPUInnerLoops); empty when not recorded.
	CPUInnerLoops []string `json:"cpu_inner_loops,omitempty"`
	// CPUModels are, per cpu head, the processors whose times trained it
	// (GCN.CPUModels); empty when not recorded.
	CPUModels map[string][]string `json:"cpu_models,omitempty"`
	// LabelRanks are, per head, the ranks its labels were timed at
	// (GCN.LabelRanks); empty when not recorded.
	LabelRanks map[string][]int `json:"label_ranks,omitempty"`
	// Weights counts the float32 values in the network's initializers
	// once the graph is read: at load for a file without a checksum,
	// else at the network's first use or by ONNXModel.Check.
	Weights int `json:"weights"`
	Bytes   int `json:"bytes"`
}

// Trees returns the trees of the named head, nil for a head without
// trees. The trees of a sealed file are read at their first use, so a
// head's trees that this reader refuses give their error here.
func (in *Info) Trees(head string) (*Trees, error) {
	h := in.headTrees(head)
	if h == nil {
		return nil, nil
	}
	t, err := h.get()
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", in.Path, err)
	}
	return t, nil
}

// scorer returns how a prediction scores the named head's trees
// (headTrees.scorer), nil for a head without trees.
func (in *Info) scorer(head string) (treeScorer, error) {
	h := in.headTrees(head)
	if h == nil {
		return nil, nil
	}
	sc, err := h.scorer()
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", in.Path, err)
	}
	return sc, nil
}

// headTrees returns the named head's trees in the file: nil for a head
// without trees, and for an Info not read from a file.
func (in *Info) headTrees(head string) *headTrees {
	if in.trees == nil {
		return nil
	}
	return in.trees.heads[head]
}

// AllTrees reads the trees of every head that has them (TreeHeads) and
// returns them by head, and counts their nodes in TreeNodes.
func (in *Info) AllTrees() (map[string]*Trees, error) {
	out := map[string]*Trees{}
	if in.trees == nil { // an Info not read from a file
		return out, nil
	}
	in.trees.mu.Lock() // for TreeNodes
	defer in.trees.mu.Unlock()
	nodes := 0
	for _, h := range in.TreeHeads {
		t, err := in.Trees(h)
		if err != nil {
			return nil, err
		}
		out[h] = t
		nodes += t.Nodes()
	}
	in.TreeNodes = nodes
	return out, nil
}

// HeadIndex returns the index of the head named name, or -1.
func (in *Info) HeadIndex(name string) int {
	return slices.IndexFunc(in.Heads, func(h Head) bool { return h.Name == name })
}

// ONNXModel is a model file loaded for inference through onnx-go. Run is
// safe for concurrent use: gorgonia's tape machine is not, so each
// goroutine gets its own instance of the graph from a free list.
type ONNXModel struct {
	Info    Info
	data    []byte
	runtime string

	// The graph, read by graph: at load for a file without a checksum,
	// at the first use of the network or of a head's trees' node for a
	// sealed one.
	graphOnce sync.Once
	graphErr  error
	// graphRead is set once graph has read the graph without error: Warm
	// asks it, so as never to wait on a load.
	graphRead atomic.Bool
	// network is data without the trees (splitTrees): the graph the
	// network's runtimes run, which this package evaluates itself.
	network []byte
	prog    *program

	mu       sync.Mutex
	free     []*onnxInstance
	machines []*machine

	// chosen remembers the heads hostHead chose, for the decisions after
	// the first of a device (ONNXModel.hostHead).
	chosenMu sync.Mutex
	chosen   []headChoice
}

// instanceMu serialises building instances and their first run: onnx-go's
// graph construction touches package-level counters.
var instanceMu sync.Mutex

type onnxInstance struct {
	backend *gorgonnx.Graph
	model   *onnx.Model
	inputs  []*tensor.Dense
	ran     bool
}

// LoadONNX reads and validates a model file.
func LoadONNX(path string) (*ONNXModel, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	return ParseONNX(path, data)
}

// ParseONNX validates a model file's bytes; name is used in errors. It
// checks the checksum, the metadata and, for a file without a checksum,
// the protobuf, that the graph's inputs and outputs have the shapes the
// metadata implies, and every head's trees, and compiles the graph for
// the builtin runtime, so a file it cannot run fails here rather than at
// the first prediction. A sealed file, whose bytes are known to be its
// writer's, has its graph read and checked when first needed: a
// prediction that its trees answer from their packed bytes reads only
// those and the metadata. UseRuntime switches to onnx-go.
func ParseONNX(name string, data []byte) (*ONNXModel, error) {
	return parseONNX(name, data, false)
}

// parseONNX is ParseONNX, that neither computes the checksum of a file
// trusted to be its writer's, one embedded in the executable, nor checks
// its packed trees before scoring them (headTrees.scorer).
func parseONNX(name string, data []byte, trusted bool) (*ONNXModel, error) {
	info, err := parseHeader(data, trusted)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	info.Path = name
	m := &ONNXModel{Info: *info, data: data, runtime: "builtin"}
	if !info.Sealed {
		if err := m.graph(); err != nil {
			return nil, fmt.Errorf("model %s: %w", name, err)
		}
		return m, nil
	}
	m.Info.trees.graph = m.graph
	return m, nil
}

// graph reads and checks the file's graph (parseGraph) and compiles it
// for the builtin runtime, once.
func (m *ONNXModel) graph() error {
	m.graphOnce.Do(func() {
		mp, network, err := parseGraph(m.data, &m.Info)
		if err != nil {
			m.graphErr = err
			return
		}
		prog, err := compile(mp.Graph)
		if err != nil {
			m.graphErr = err
			return
		}
		if len(prog.inputs) != len(inputNames) || len(prog.outputs) != len(m.Info.Heads) {
			m.graphErr = fmt.Errorf("graph has %d inputs and %d outputs, expected %d and %d", len(prog.inputs), len(prog.outputs), len(inputNames), len(m.Info.Heads))
			return
		}
		// One machine (the buffers of every value) is made now: the
		// first prediction should not pay for allocating and faulting
		// them in.
		m.network, m.prog, m.machines = network, prog, []*machine{prog.newMachine()}
		m.graphRead.Store(true)
	})
	return m.graphErr
}

// Check reads and checks what a load of a sealed file leaves for its
// first use: the graph, and every head's trees. A file that passes
// answers every prediction it has a head for.
func (m *ONNXModel) Check() error {
	if err := m.graph(); err != nil {
		return fmt.Errorf("model %s: %w", m.Info.Path, err)
	}
	if _, err := m.Info.AllTrees(); err != nil {
		return err
	}
	for _, h := range m.Info.PackedTrees {
		// Whole, even in a file whose packed trees are scored unchecked.
		ht := m.Info.trees.heads[h]
		if _, err := viewPacked(ht.packed, len(ht.classes), features.Count, true); err != nil {
			return fmt.Errorf("model %s: head %s: %w", m.Info.Path, h, err)
		}
	}
	return nil
}

// UseRuntime selects how Run executes the graph, one of Runtimes. For
// onnx-go it builds an instance now, so a file onnx-go cannot run fails
// here.
func (m *ONNXModel) UseRuntime(name string) error {
	switch name {
	case "builtin":
	case "onnx-go":
		m.mu.Lock()
		ready := len(m.free) > 0
		m.mu.Unlock()
		if !ready {
			inst, err := m.newInstance()
			if err != nil {
				return fmt.Errorf("model %s: %w", m.Info.Path, err)
			}
			m.put(inst)
		}
	default:
		return fmt.Errorf("unknown model runtime %q (known: %s)", name, strings.Join(Runtimes, ", "))
	}
	m.runtime = name
	return nil
}

// Runtime returns the runtime Run uses.
func (m *ONNXModel) Runtime() string { return m.runtime }

// Field numbers of the ModelProto fields parseHeader reads.
const (
	fieldModelIRVersion   = 1 // ModelProto.ir_version
	fieldModelOpsetImport = 8 // ModelProto.opset_import
	fieldOpsetDomain      = 1 // OperatorSetIdProto.domain
	fieldOpsetVersion     = 2 // OperatorSetIdProto.version
)

// parseHeader reads and checks what a model file says of itself outside
// its graph: the IR version, the opsets, the metadata and the checksum
// (not computed when trusted: the embedded models, which are part of the
// executable and checked whole by its tests). It reads the file's
// top-level fields straight from its bytes and steps over the graph,
// most of the file, unread: a sealed file's graph is read when first
// needed (ONNXModel.graph), so that a prediction answered by a head's
// trees touches only the metadata and those trees' packed bytes.
func parseHeader(data []byte, trusted bool) (*Info, error) {
	info := &Info{Bytes: len(data)}
	meta := map[string]string{}
	graphs, checksumAt := 0, -1
	var checksum string
	err := forEachRawField(data, func(num protowire.Number, typ protowire.Type, v, raw []byte) error {
		if checksumAt >= 0 {
			return fmt.Errorf("metadata %s is not the file's last field: the bytes after it would not be checked", metaChecksum)
		}
		switch {
		case num == fieldModelIRVersion && typ == protowire.VarintType:
			x, _ := protowire.ConsumeVarint(v)
			info.IRVersion = int64(x)
		case num == fieldModelOpsetImport && typ == protowire.BytesType:
			var domain string
			var version uint64
			err := forEachField(v, func(n protowire.Number, t protowire.Type, fv []byte) error {
				switch {
				case n == fieldOpsetDomain && t == protowire.BytesType:
					domain = string(fv)
				case n == fieldOpsetVersion && t == protowire.VarintType:
					version, _ = protowire.ConsumeVarint(fv)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if domain == "" {
				info.Opset = int64(version)
			}
		case num == fieldModelGraph && typ == protowire.BytesType:
			graphs++
		case num == fieldModelMetadata && typ == protowire.BytesType:
			key, err := stringField(v, fieldStringEntryKey)
			if err != nil {
				return err
			}
			value, err := stringField(v, fieldStringEntryVal)
			if err != nil {
				return err
			}
			if key == metaChecksum {
				// raw is a suffix of data's bytes from the field on.
				checksumAt, checksum = cap(data)-cap(raw), value
				return nil
			}
			meta[key] = value
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("not an ONNX protobuf: %v", err)
	}
	if graphs == 0 {
		return nil, errors.New("not an ONNX model: no graph")
	}
	if checksumAt >= 0 {
		info.Sealed = true
		if !trusted {
			if got := checksumOf(data[:checksumAt]); !strings.EqualFold(checksum, got) {
				return nil, fmt.Errorf("checksum mismatch: the file says %q, its bytes give %q: it was damaged or edited after it was written (write it again: sparsetune train or tune-model)", checksum, got)
			}
		}
	}
	get := func(key string) (string, error) {
		v, ok := meta[key]
		if !ok {
			return "", fmt.Errorf("missing metadata %s (not a sparsetune model?)", key)
		}
		return v, nil
	}
	v, err := get(metaVersion)
	if err != nil {
		return nil, err
	}
	if info.FormatVersion, err = strconv.Atoi(v); err != nil || info.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("model format version %q, this build reads version %d", v, FormatVersion)
	}
	if info.Op, err = get(metaOp); err != nil {
		return nil, err
	}
	if info.Op != "ttm" && info.Op != "mttkrp" {
		return nil, fmt.Errorf("metadata %s = %q, expected ttm or mttkrp", metaOp, info.Op)
	}
	if v, err = get(metaBudget); err != nil {
		return nil, err
	}
	if _, err := fmt.Sscanf(v, "%dx%d", &info.Budget.Rows, &info.Budget.Cols); err != nil || info.Budget.Rows < 1 || info.Budget.Cols < 1 {
		return nil, fmt.Errorf("metadata %s = %q, expected ROWSxCOLS", metaBudget, v)
	}
	if v, err = get(metaHidden); err != nil {
		return nil, err
	}
	if info.Hidden, err = strconv.Atoi(v); err != nil || info.Hidden < 1 {
		return nil, fmt.Errorf("metadata %s = %q, expected a positive integer", metaHidden, v)
	}
	if v, err = get(metaMLP); err != nil {
		return nil, err
	}
	if _, err := fmt.Sscanf(v, "%d,%d", &info.MLP[0], &info.MLP[1]); err != nil {
		return nil, fmt.Errorf("metadata %s = %q, expected two widths", metaMLP, v)
	}
	if v, err = get(metaFeatures); err != nil {
		return nil, err
	}
	info.Features = strings.Split(v, ",")
	if !slices.Equal(info.Features, features.Names[:]) {
		return nil, fmt.Errorf("metadata %s lists %d global features that differ from this build's %d (%s)", metaFeatures, len(info.Features), features.Count, strings.Join(features.Names[:], ","))
	}
	if v, err = get(metaNodeFeatures); err != nil {
		return nil, err
	}
	info.NodeFeatures = strings.Split(v, ",")
	if !slices.Equal(info.NodeFeatures, graphenc.NodeFeatureNames[:]) {
		return nil, fmt.Errorf("metadata %s = %q, this build computes %s", metaNodeFeatures, v, strings.Join(graphenc.NodeFeatureNames[:], ","))
	}
	for _, vec := range []struct {
		key string
		dst *features.Vector
	}{{metaMean, &info.Mean}, {metaStd, &info.Std}, {metaTrainMin, &info.TrainMin}, {metaTrainMax, &info.TrainMax}} {
		if v, err = get(vec.key); err != nil {
			return nil, err
		}
		parts := strings.Split(v, ",")
		if len(parts) != features.Count {
			return nil, fmt.Errorf("metadata %s has %d values, expected %d", vec.key, len(parts), features.Count)
		}
		for i, p := range parts {
			if vec.dst[i], err = strconv.ParseFloat(p, 64); err != nil {
				return nil, fmt.Errorf("metadata %s value %d: %q is not a number", vec.key, i+1, p)
			}
		}
	}
	if v, err = get(metaHeads); err != nil {
		return nil, err
	}
	for _, h := range strings.Split(v, ",") {
		cl, err := get(metaClasses + h)
		if err != nil {
			return nil, err
		}
		info.Heads = append(info.Heads, Head{Name: h, Classes: strings.Split(cl, ",")})
	}
	if v, ok := meta[metaRuleHeads]; ok {
		for _, h := range strings.Split(v, ",") {
			if info.HeadIndex(h) < 0 {
				return nil, fmt.Errorf("metadata %s names %q, which is not a head (%s)", metaRuleHeads, h, strings.Join(headNames(info.Heads), ","))
			}
			info.RuleHeads = append(info.RuleHeads, h)
		}
	}

	if v, ok := meta[metaCPUInnerLoops]; ok && v != "" {
		info.CPUInnerLoops = strings.Split(v, ",")
	}
	// In key order, so that a file with several bad keys is always
	// reported by the same one.
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		h, ok := strings.CutPrefix(k, metaCPUModels)
		v := meta[k]
		if !ok || v == "" {
			continue
		}
		if info.HeadIndex(h) < 0 || !IsCPUHead(h) {
			return nil, fmt.Errorf("metadata %s: %q is not a cpu head (%s)", k, h, strings.Join(headNames(info.Heads), ","))
		}
		if info.CPUModels == nil {
			info.CPUModels = map[string][]string{}
		}
		info.CPUModels[h] = strings.Split(v, cpuModelSep)
	}
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		h, ok := strings.CutPrefix(k, metaLabelRanks)
		if !ok {
			continue
		}
		if info.HeadIndex(h) < 0 {
			return nil, fmt.Errorf("metadata %s: %q is not a head (%s)", k, h, strings.Join(headNames(info.Heads), ","))
		}
		ranks, err := parseRanks(meta[k])
		if err != nil {
			return nil, fmt.Errorf("metadata %s: %w", k, err)
		}
		if info.LabelRanks == nil {
			info.LabelRanks = map[string][]int{}
		}
		info.LabelRanks[h] = ranks
	}
	info.FeatureRevision = 1
	if v, ok := meta[metaFeatureRevision]; ok {
		if info.FeatureRevision, err = strconv.Atoi(v); err != nil || info.FeatureRevision < 1 {
			return nil, fmt.Errorf("metadata %s: %q is not a feature revision", metaFeatureRevision, v)
		}
	}
	if err := checkFeatureRevision(info.Op, info.FeatureRevision); err != nil {
		return nil, err
	}
	if info.trees, err = treeHeads(meta[metaTreeHeads], info.Heads, info.RuleHeads); err != nil {
		return nil, err
	}
	info.trees.trusted = trusted
	for _, h := range info.Heads {
		if info.trees.heads[h.Name] != nil {
			info.TreeHeads = append(info.TreeHeads, h.Name)
		}
	}
	if info.BlendMargins, err = parseBlendMargins(meta[metaBlendMargins], info.TreeHeads); err != nil {
		return nil, err
	}
	info.body = len(data)
	if checksumAt >= 0 {
		info.body = checksumAt
	}
	if err := info.trees.locatePacked(meta[metaPackedTrees], data[:info.body]); err != nil {
		return nil, err
	}
	for _, h := range info.TreeHeads {
		if info.trees.heads[h].packed != nil {
			info.PackedTrees = append(info.PackedTrees, h)
		}
	}
	return info, nil
}

// parseGraph reads and checks the graph of the model file data against
// its metadata, read by parseHeader into info: the network's inputs and
// outputs, the trees' nodes and outputs, and the packed trees. It
// returns the network's graph and the file without the trees (the
// network's runtimes are given it), and counts the network's weights in
// info. A file without a checksum has every head's trees read and
// compared with their packed bytes now; a sealed file, whose bytes are
// its writer's, has each head's read at their first use.
func parseGraph(data []byte, info *Info) (*onnxpb.ModelProto, []byte, error) {
	network, treeNodes, treeOutputs, packed, err := splitTrees(data)
	if err != nil {
		return nil, nil, fmt.Errorf("not an ONNX protobuf: %v", err)
	}
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(network, &mp); err != nil {
		return nil, nil, fmt.Errorf("not an ONNX protobuf: %v", err)
	}
	if mp.Graph == nil {
		return nil, nil, errors.New("not an ONNX model: no graph")
	}
	// The graph must have the inputs and outputs the metadata implies.
	br, bc, nf := info.Budget.Rows, info.Budget.Cols, features.Count
	wantIn := [][2]int{{br, bc}, {br, graphenc.NodeFeatures}, {bc, graphenc.NodeFeatures}, {1, br}, {1, bc}, {1, nf}}
	if len(mp.Graph.Input) < len(inputNames) {
		return nil, nil, fmt.Errorf("graph has %d inputs, expected %d (%s)", len(mp.Graph.Input), len(inputNames), strings.Join(inputNames, ", "))
	}
	for i, name := range inputNames {
		vi := mp.Graph.Input[i]
		if vi.GetName() != name {
			return nil, nil, fmt.Errorf("graph input %d is %q, expected %q", i+1, vi.GetName(), name)
		}
		if got := shapeOf(vi); !slices.Equal(got, wantIn[i][:]) {
			return nil, nil, fmt.Errorf("input %s has shape %v, expected %v for a %dx%d budget", name, got, wantIn[i], br, bc)
		}
	}
	if err := info.trees.parseNodes(treeNodes, treeOutputs, packed, !info.Sealed); err != nil {
		return nil, nil, err
	}
	if !info.Sealed {
		// parseNodes has read them all: this only counts their nodes.
		if _, err := info.AllTrees(); err != nil {
			return nil, nil, err
		}
	}
	if len(mp.Graph.Output) != len(info.Heads) {
		return nil, nil, fmt.Errorf("graph has %d outputs besides the trees', expected one per head (%d)", len(mp.Graph.Output), len(info.Heads))
	}
	for k, h := range info.Heads {
		vi := mp.Graph.Output[k]
		if want := []int{1, len(h.Classes)}; vi.GetName() != outputName(h.Name) || !slices.Equal(shapeOf(vi), want) {
			return nil, nil, fmt.Errorf("output %d is %q of shape %v, expected %q of shape %v", k+1, vi.GetName(), shapeOf(vi), outputName(h.Name), want)
		}
	}
	info.Weights = 0
	for _, t := range mp.Graph.Initializer {
		info.Weights += len(t.FloatData)
	}
	return &mp, network, nil
}

func shapeOf(vi *onnxpb.ValueInfoProto) []int {
	var dims []int
	for _, d := range vi.GetType().GetTensorType().GetShape().GetDim() {
		dims = append(dims, int(d.GetDimValue()))
	}
	return dims
}

// newInstance builds an onnx-go graph of the model and runs it once on
// zeros, under instanceMu.
func (m *ONNXModel) newInstance() (inst *onnxInstance, err error) {
	instanceMu.Lock()
	defer instanceMu.Unlock()
	defer func() {
		// onnx-go panics on some graphs it cannot handle; a model file
		// must give an error, not crash the caller.
		if r := recover(); r != nil {
			inst, err = nil, fmt.Errorf("onnx-go cannot run this graph: %v", r)
		}
	}()
	if err := m.graph(); err != nil {
		return nil, err
	}
	backend := gorgonnx.NewGraph()
	model := onnx.NewModel(backend)
	// onnx-go is given the file without the trees, which it cannot run.
	if err := model.UnmarshalBinary(m.network); err != nil {
		return nil, fmt.Errorf("onnx-go cannot load this graph: %v", err)
	}
	br, bc, f := m.Info.Budget.Rows, m.Info.Budget.Cols, graphenc.NodeFeatures
	shapes := [][2]int{{br, bc}, {br, f}, {bc, f}, {1, br}, {1, bc}, {1, features.Count}}
	inst = &onnxInstance{backend: backend, model: model}
	for i, s := range shapes {
		t := tensor.New(tensor.WithShape(s[0], s[1]), tensor.WithBacking(make([]float32, s[0]*s[1])))
		inst.inputs = append(inst.inputs, t)
		if err := model.SetInput(i, t); err != nil {
			return nil, fmt.Errorf("onnx-go: input %s: %v", inputNames[i], err)
		}
	}
	if err := backend.Run(); err != nil {
		return nil, fmt.Errorf("onnx-go cannot run this graph: %v", err)
	}
	inst.ran = true
	return inst, nil
}

func (m *ONNXModel) get() (*onnxInstance, error) {
	m.mu.Lock()
	if n := len(m.free); n > 0 {
		inst := m.free[n-1]
		m.free = m.free[:n-1]
		m.mu.Unlock()
		return inst, nil
	}
	m.mu.Unlock()
	return m.newInstance()
}

func (m *ONNXModel) put(inst *onnxInstance) {
	m.mu.Lock()
	m.free = append(m.free, inst)
	m.mu.Unlock()
}

// Run returns each head's class probabilities for in.
func (m *ONNXModel) Run(in *Input) (probs [][]float64, err error) {
	return m.run(in, -1)
}

// RunHead returns head k's class probabilities for in. The builtin
// runtime computes only what that head's output needs: the shared layers
// and one head of the several.
func (m *ONNXModel) RunHead(in *Input, k int) ([]float64, error) {
	if k < 0 || k >= len(m.Info.Heads) {
		return nil, fmt.Errorf("model %s: head %d of %d", m.Info.Path, k, len(m.Info.Heads))
	}
	probs, err := m.run(in, k)
	if err != nil {
		return nil, err
	}
	return probs[k], nil
}

// run returns the heads' probabilities for in: every head's when head is
// -1, else only that head's (the others nil) where the runtime can skip
// them.
func (m *ONNXModel) run(in *Input, head int) (probs [][]float64, err error) {
	c := Config{Budget: m.Info.Budget}
	if err := c.checkInput(in); err != nil {
		return nil, err
	}
	if err := m.graph(); err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Info.Path, err)
	}
	if m.runtime == "onnx-go" {
		return m.runONNXGo(in)
	}
	m.mu.Lock()
	var mc *machine
	if n := len(m.machines); n > 0 {
		mc, m.machines = m.machines[n-1], m.machines[:n-1]
	}
	m.mu.Unlock()
	if mc == nil {
		mc = m.prog.newMachine()
	}
	for i, src := range [][]float32{in.Adj, in.RowFeat, in.ColFeat, in.RowMask, in.ColMask} {
		copy(mc.vals[m.prog.inputs[i]], src)
	}
	g := mc.vals[m.prog.inputs[5]]
	for i, v := range in.Global {
		g[i] = float32(v)
	}
	mc.run(head)
	probs = make([][]float64, len(m.prog.outputs))
	for k, id := range m.prog.outputs {
		if head >= 0 && k != head {
			continue
		}
		probs[k] = make([]float64, len(mc.vals[id]))
		for i, v := range mc.vals[id] {
			probs[k][i] = float64(v)
		}
	}
	m.mu.Lock()
	m.machines = append(m.machines, mc)
	m.mu.Unlock()
	return probs, nil
}

// runONNXGo runs in through an onnx-go instance.
func (m *ONNXModel) runONNXGo(in *Input) (probs [][]float64, err error) {
	inst, err := m.get()
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			// The instance may be in any state: drop it.
			probs, err = nil, fmt.Errorf("model %s: onnx-go: %v", m.Info.Path, r)
			return
		}
		m.put(inst)
	}()
	for i, src := range [][]float32{in.Adj, in.RowFeat, in.ColFeat, in.RowMask, in.ColMask} {
		copy(inst.inputs[i].Data().([]float32), src)
	}
	g := inst.inputs[5].Data().([]float32)
	for i, v := range in.Global {
		g[i] = float32(v)
	}
	for i, t := range inst.inputs {
		if err := inst.model.SetInput(i, t); err != nil {
			return nil, fmt.Errorf("model %s: onnx-go: input %s: %v", m.Info.Path, inputNames[i], err)
		}
	}
	if err := inst.backend.Run(); err != nil {
		return nil, fmt.Errorf("model %s: onnx-go: %v", m.Info.Path, err)
	}
	outs, err := inst.model.GetOutputTensors()
	if err != nil {
		return nil, fmt.Errorf("model %s: onnx-go: %v", m.Info.Path, err)
	}
	for _, t := range outs {
		d, ok := t.Data().([]float32)
		if !ok {
			return nil, fmt.Errorf("model %s: onnx-go returned %T, expected float32s", m.Info.Path, t.Data())
		}
		p := make([]float64, len(d))
		for i, v := range d {
			p[i] = float64(v)
		}
		probs = append(probs, p)
	}
	return probs, nil
}

// FeatureRevisionError is the error of loading a model trained on
// features whose meaning differs from this build's (features.Revision).
type FeatureRevisionError struct {
	Op       string // the model's op
	Revision int    // the revision it was trained on
}

func (e *FeatureRevisionError) Error() string {
	if e.Revision > features.Revision {
		return fmt.Sprintf("the model was trained on features of revision %d, and this build computes revision %d: use a newer sparsetune", e.Revision, features.Revision)
	}
	return fmt.Sprintf("the model was trained on features of revision %d, whose %s fiber features describe other fibers than this build's (revision %d): retrain it (sparsetune train, or sparsetune tune-model)", e.Revision, strings.ToUpper(e.Op), features.Revision)
}

// checkFeatureRevision reports whether a model for op trained on the
// features of revision rev can be fed this build's (features.Revision).
// Revision 2 changed what MTTKRP's fiber features describe, so an MTTKRP
// model of revision 1 would be fed numbers of another meaning and answer
// wrongly without a sign; a model of a later revision than this build
// knows is refused too. SpTTM's features are the same in both.
func checkFeatureRevision(op string, rev int) error {
	if rev > features.Revision || rev < 2 && op == hetero.MTTKRP.String() {
		return &FeatureRevisionError{Op: op, Revision: rev}
	}
	return nil
}

// parseRanks reads a metadata list of ranks: positive decimals, comma
// separated, in increasing order (checkRanks).
func parseRanks(v string) ([]int, error) {
	var ranks []int
	for _, f := range strings.Split(v, ",") {
		r, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a rank (a positive integer)", f)
		}
		ranks = append(ranks, r)
	}
	return ranks, checkRanks(ranks)
}

// checkRanks reports whether ranks are positive and increasing, as a
// model file lists them.
func checkRanks(ranks []int) error {
	for i, r := range ranks {
		if r < 1 {
			return fmt.Errorf("%q is not a rank (a positive integer)", strconv.Itoa(r))
		}
		if i > 0 && r <= ranks[i-1] {
			return fmt.Errorf("ranks %q are not in increasing order", joinInts(ranks))
		}
	}
	return nil
}
