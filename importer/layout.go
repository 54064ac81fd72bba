package importer

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/train"
)

// Slot is one tensor of a model's flat parameter vector: Shape elements in C order at Offset.
type Slot struct {
	Role   string // e.g. "layer 1 weight"
	Shape  []int
	Offset int
}

// Layout is the order of a zoo model's parameters in the flat vector run files record (train's
// order, docs/import.md): for softmax regression and MLPs, layer by layer the weight
// (out x in, row-major) then the bias, exactly PyTorch's nn.Linear state_dict order; for the
// quadratic model the vector w itself.
type Layout struct {
	Slots []Slot
	D     int
}

// LayoutOf returns the layout of model mc on data of dimension dim with classes, checked against
// train's own parameter count.
func LayoutOf(mc train.ModelConfig, dim, classes int) (Layout, error) {
	d, err := train.ParamCount(mc, dim, classes)
	if err != nil {
		return Layout{}, err
	}
	var lay Layout
	switch mc.Kind {
	case "quadratic":
		lay.Slots = []Slot{{Role: "w", Shape: []int{dim}}}
		lay.D = dim
	case "softmax", "mlp":
		sizes := append(append([]int{dim}, mc.Hidden...), classes)
		for l := 0; l+1 < len(sizes); l++ {
			in, out := sizes[l], sizes[l+1]
			lay.Slots = append(lay.Slots,
				Slot{Role: fmt.Sprintf("layer %d weight", l+1), Shape: []int{out, in}, Offset: lay.D},
				Slot{Role: fmt.Sprintf("layer %d bias", l+1), Shape: []int{out}, Offset: lay.D + out*in})
			lay.D += out*in + out
		}
	default:
		return Layout{}, fmt.Errorf("layout: model kind %q is not softmax, mlp or quadratic", mc.Kind)
	}
	if lay.D != d {
		return Layout{}, fmt.Errorf("layout: %d parameters, train counts %d (layout out of date)", lay.D, d)
	}
	return lay, nil
}

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
	switch {
	case len(names) > 0:
		if len(names) != len(l.Slots) {
			return nil, fmt.Errorf("%d tensor names given, the model has %d tensors (%s)", len(names), len(l.Slots), l.Describe())
		}
		for i, n := range names {
			j := slices.IndexFunc(tensors, func(t ingest.Tensor) bool { return t.Name == n })
			if j < 0 {
				return nil, fmt.Errorf("no tensor %q (the file has %s)", n, tensorNames(tensors))
			}
			if err := assign(l.Slots[i], tensors[j]); err != nil {
				return nil, err
			}
		}
	case len(tensors) == 1 && len(tensors[0].Data) == l.D:
		copy(out, tensors[0].Data)
	default:
		if len(tensors) != len(l.Slots) {
			return nil, fmt.Errorf("%d tensors (%s), the model has %d (%s); give the tensor names in model order, or one flat vector of %d",
				len(tensors), tensorNames(tensors), len(l.Slots), l.Describe(), l.D)
		}
		for i, t := range tensors {
			if err := assign(l.Slots[i], t); err != nil {
				return nil, err
			}
		}
	}
	for i, v := range out {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("parameter %d (%s) is %v: the snapshot is not a finite model", i, l.slotOf(i, tensors, names), v)
		}
	}
	return out, nil
}

// slotOf names the slot holding flat index i.
func (l Layout) slotOf(i int, _ []ingest.Tensor, _ []string) string {
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
