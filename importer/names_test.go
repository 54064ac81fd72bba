package importer

import (
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/train/model"
)

// --names gives one tensor per slot: a name given twice would copy one tensor into two slots
// and leave the tensor meant for the second out, a model that was never trained, imported
// without a word. It is refused, as ExternalLayout refuses a tensor twice.
func TestFlattenNameTwice(t *testing.T) {
	lay, err := LayoutOf(model.Config{Kind: "mlp", Hidden: []int{2}, Activation: "tanh"}, []int{3}, 2)
	if err != nil {
		t.Fatal(err)
	}
	fill := func(n int, v float32) []float32 { return slices.Repeat([]float32{v}, n) }
	tensors := []ingest.Tensor{
		{Name: "fc1.weight", Shape: []int{2, 3}, Data: fill(6, 1)},
		{Name: "fc1.bias", Shape: []int{2}, Data: fill(2, 2)},
		{Name: "fc2.weight", Shape: []int{2, 2}, Data: fill(4, 3)},
		{Name: "fc2.bias", Shape: []int{2}, Data: fill(2, 4)},
	}
	got, err := lay.Flatten(tensors, []string{"fc1.weight", "fc1.bias", "fc2.weight", "fc1.bias"})
	if err == nil || !strings.Contains(err.Error(), `tensor name "fc1.bias" given twice`) {
		t.Fatalf("flattened %v, error %v; want the repeated name refused", got, err)
	}
}
