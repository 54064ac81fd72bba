package importer

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/nn"
	"github.com/fedaudit/fedaudit/train/model"
)

// Slot is one tensor of a model's flat parameter vector: Shape elements in C order at Offset.
type Slot struct {
	Role string // e.g. "layer 1 weight", or the tensor's name for an external model
	// Name is the tensor a snapshot of an external model holds this slot in (ExternalLayout);
	// empty for fedaudit's models, whose snapshots may name their tensors as they like.
	Name   string
	Shape  []int
	Offset int
}

// Layout is the order of a model's parameters in the flat vector run files record (train's
// order, docs/import.md), PyTorch's state_dict order throughout:
//   - softmax regression and MLPs: layer by layer the weight (out x in, row-major) then the
//     bias, as nn.Linear;
//   - lenet5, resnet and sequential (package nn): layer by layer, a convolution's weight
//     (out x in x k x k, as nn.Conv2d) then its bias, a dense layer's weight (out x in) then
//     bias, a GroupNorm's gamma then beta (nn.GroupNorm's weight, bias); a residual block holds
//     its first convolution, GroupNorm, second convolution, GroupNorm, then, when it changes the
//     shape, the shortcut's 1x1 convolution and GroupNorm;
//   - the quadratic model: the vector w itself;
//   - external (an architecture fedaudit does not know): the tensors of the first snapshot, in
//     file order or the order of --names, each flattened in C order (ExternalLayout).
type Layout struct {
	Slots []Slot
	D     int
	// External marks the layout of a model of unknown architecture, taken from the snapshots.
	External bool
}

// LayoutOf returns the layout of model mc on samples of the given shape (Dataset.Shape) with
// classes, checked against train's own parameter count. A model of kind external has no layout
// before its snapshots are read: see ExternalLayout.
func LayoutOf(mc model.Config, shape []int, classes int) (Layout, error) {
	if mc.Kind == model.External {
		return Layout{}, fmt.Errorf("layout: %w", model.ErrExternal)
	}
	dim := 1
	for _, s := range shape {
		dim *= s
	}
	d, err := model.ParamCountShape(mc, shape, classes)
	if err != nil {
		return Layout{}, err
	}
	var lay Layout
	switch {
	case mc.Kind == "quadratic":
		lay.add("w", dim)
	case mc.Kind == "softmax" || mc.Kind == "mlp":
		sizes := append(append([]int{dim}, mc.Hidden...), classes)
		for l := 0; l+1 < len(sizes); l++ {
			lay.add(fmt.Sprintf("layer %d weight", l+1), sizes[l+1], sizes[l])
			lay.add(fmt.Sprintf("layer %d bias", l+1), sizes[l+1])
		}
	case model.IsNNKind(mc.Kind):
		if err := lay.addNN(mc, shape, dim, classes); err != nil {
			return Layout{}, err
		}
	default:
		return Layout{}, fmt.Errorf("layout: model kind %q has no parameter layout", mc.Kind)
	}
	if lay.D != d {
		return Layout{}, fmt.Errorf("layout: %d parameters, train counts %d (layout out of date)", lay.D, d)
	}
	return lay, nil
}

// add appends a slot of the given shape.
func (l *Layout) add(role string, shape ...int) {
	n := 1
	for _, s := range shape {
		n *= s
	}
	l.Slots = append(l.Slots, Slot{Role: role, Shape: shape, Offset: l.D})
	l.D += n
}

// addNN appends the slots of one of package nn's models, layer by layer in the order of the
// layers' parameter ranges (nn's layers.go), each layer's count checked against nn's own.
func (l *Layout) addNN(mc model.Config, shape []int, dim, classes int) error {
	spec, err := model.NNSpec(mc, shape, dim, classes)
	if err != nil {
		return err
	}
	m, err := nn.Build[float32](spec, nn.NaiveGemm[float32]{})
	if err != nil {
		return err
	}
	for _, li := range m.Layers() {
		before := l.D
		name := fmt.Sprintf("layer %d %s", li.Layer, li.Kind)
		conv := func(role string, in, out, k int) {
			l.add(role+" weight", out, in, k, k)
			l.add(role+" bias", out)
		}
		norm := func(role string, c int) {
			l.add(role+" gamma", c)
			l.add(role+" beta", c)
		}
		switch li.Kind {
		case "conv2d":
			conv(name, li.In.C, li.Out.C, spec.Layers[li.Layer-1].Kernel)
		case "dense":
			l.add(name+" weight", li.Out.C, li.In.C)
			l.add(name+" bias", li.Out.C)
		case "groupnorm":
			norm(name, li.Out.C)
		case "residual":
			conv(name+" conv1", li.In.C, li.Out.C, 3)
			norm(name+" norm1", li.Out.C)
			conv(name+" conv2", li.Out.C, li.Out.C, 3)
			norm(name+" norm2", li.Out.C)
			if li.In != li.Out {
				conv(name+" shortcut", li.In.C, li.Out.C, 1)
				norm(name+" shortcut norm", li.Out.C)
			}
		}
		if l.D-before != li.Params {
			return fmt.Errorf("layout: %s: %d parameters, nn counts %d (layout out of date)", name, l.D-before, li.Params)
		}
	}
	return nil
}

// ExternalLayout is the layout of a model of unknown architecture, taken from one snapshot: the
// tensors named by names, in that order, or else every tensor in file order (safetensors: by
// data offset), each flattened in C order. Every other snapshot must hold tensors of the same
// names and shapes.
func ExternalLayout(tensors []ingest.Tensor, names []string) (Layout, error) {
	lay := Layout{External: true}
	pick := tensors
	if len(names) > 0 {
		pick = nil
		for _, n := range names {
			j := slices.IndexFunc(tensors, func(t ingest.Tensor) bool { return t.Name == n })
			if j < 0 {
				return Layout{}, fmt.Errorf("no tensor %q (the file has %s)", n, tensorNames(tensors))
			}
			pick = append(pick, tensors[j])
		}
	}
	if len(pick) == 0 {
		return Layout{}, fmt.Errorf("the snapshot holds no tensor")
	}
	seen := map[string]bool{}
	for _, t := range pick {
		if seen[t.Name] {
			return Layout{}, fmt.Errorf("tensor %q appears twice", t.Name)
		}
		seen[t.Name] = true
		if lay.D+len(t.Data) > maxExternalParams {
			return Layout{}, fmt.Errorf("more than %d parameters: too large to audit by import", maxExternalParams)
		}
		lay.add(t.Name, t.Shape...)
		lay.Slots[len(lay.Slots)-1].Name = t.Name
	}
	return lay, nil
}

// maxExternalParams caps an external model's parameter vector as train caps its own models'
// (cuBLAS's 32-bit sizes): a run file row holds the whole vector.
const maxExternalParams = math.MaxInt32

// Describe lists the slots as "role [shape]" lines, for messages and `audit import --help`.
func (l Layout) Describe() string {
	parts := make([]string, len(l.Slots))
	for i, s := range l.Slots {
		parts[i] = fmt.Sprintf("%s %v", s.Role, s.Shape)
	}
	return strings.Join(parts, ", ")
}

// Flatten maps the tensors of one snapshot onto the flat parameter vector:
//   - with names (one per slot, in slot order), the tensors of those names; others are ignored;
//   - else a lone tensor of exactly D elements is the flat vector itself;
//   - else, for an external layout, the tensors of the slots' names (every tensor of the
//     snapshot must be one of them);
//   - else the tensors in file order must match the slots one to one by shape.
//
// NaN and infinite parameters are refused, naming the tensor and the element.
func (l Layout) Flatten(tensors []ingest.Tensor, names []string) ([]float32, error) {
	out := make([]float32, l.D)
	assign := func(s Slot, t ingest.Tensor) error {
		if !slices.Equal(t.Shape, s.Shape) {
			return fmt.Errorf("tensor %q has shape %v, the model's %s needs %v (model layout: %s)", t.Name, t.Shape, s.Role, s.Shape, l.Describe())
		}
		copy(out[s.Offset:], t.Data)
		return nil
	}
	byName := func(names []string) error {
		for i, n := range names {
			j := slices.IndexFunc(tensors, func(t ingest.Tensor) bool { return t.Name == n })
			if j < 0 {
				return fmt.Errorf("no tensor %q (the file has %s)", n, tensorNames(tensors))
			}
			if err := assign(l.Slots[i], tensors[j]); err != nil {
				return err
			}
		}
		return nil
	}
	switch {
	case len(names) > 0:
		if len(names) != len(l.Slots) {
			return nil, fmt.Errorf("%d tensor names given, the model has %d tensors (%s)", len(names), len(l.Slots), l.Describe())
		}
		for i, n := range names {
			if slices.Contains(names[:i], n) {
				// One tensor in two slots would leave out the tensor meant for the second.
				return nil, fmt.Errorf("tensor name %q given twice: one tensor per slot of the model (%s)", n, l.Describe())
			}
		}
		if err := byName(names); err != nil {
			return nil, err
		}
	case len(tensors) == 1 && len(tensors[0].Data) == l.D:
		copy(out, tensors[0].Data)
	case l.External:
		slotNames := make([]string, len(l.Slots))
		for i, s := range l.Slots {
			slotNames[i] = s.Name
		}
		for _, t := range tensors {
			if !slices.Contains(slotNames, t.Name) {
				return nil, fmt.Errorf("tensor %q is not in the layout taken from the first snapshot (%s)", t.Name, l.Describe())
			}
		}
		if err := byName(slotNames); err != nil {
			return nil, err
		}
	default:
		if len(tensors) != len(l.Slots) {
			return nil, fmt.Errorf("%d tensors (%s), the model has %d (%s); give the tensor names in model order, or one flat vector of %d",
				len(tensors), tensorNames(tensors), len(l.Slots), l.Describe(), l.D)
		}
		for i, t := range tensors {
			if err := assign(l.Slots[i], t); err != nil {
				if len(tensors) > 1 && slices.IsSortedFunc(tensors, func(a, b ingest.Tensor) int { return strings.Compare(a.Name, b.Name) }) {
					// safetensors' own writer (save_file) lays tensors out by dtype, then name:
					// fc1.bias before fc1.weight, whatever the model's order.
					err = fmt.Errorf("%w; the file's tensors are in name order, as safetensors' save_file writes them, not necessarily the model's: give their names in model order with --names", err)
				}
				return nil, err
			}
		}
	}
	for i, v := range out {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("parameter %d (%s) is %v: the snapshot is not a finite model", i, l.slotOf(i), v)
		}
	}
	return out, nil
}

// slotOf names the slot holding flat index i.
func (l Layout) slotOf(i int) string {
	for k := len(l.Slots) - 1; k >= 0; k-- {
		if i >= l.Slots[k].Offset {
			return fmt.Sprintf("%s, element %d", l.Slots[k].Role, i-l.Slots[k].Offset)
		}
	}
	return "?"
}

func tensorNames(ts []ingest.Tensor) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s %v", t.Name, t.Shape)
	}
	return strings.Join(parts, ", ")
}
