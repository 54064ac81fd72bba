package importer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/ingest"
	"github.com/fedaudit/fedaudit/train/model"
)

// TestLayoutMLP pins the order documented in docs/import.md: layer by layer weight (out x in)
// then bias, the parameter count train uses.
func TestLayoutMLP(t *testing.T) {
	lay, err := LayoutOf(model.Config{Kind: "mlp", Hidden: []int{4}, Activation: "tanh"}, []int{3}, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := "layer 1 weight [4 3], layer 1 bias [4], layer 2 weight [2 4], layer 2 bias [2]"
	if lay.Describe() != want || lay.D != 12+4+8+2 {
		t.Fatalf("layout %q (d %d), want %q (d 26)", lay.Describe(), lay.D, want)
	}
	offs := []int{}
	for _, s := range lay.Slots {
		offs = append(offs, s.Offset)
	}
	if !slices.Equal(offs, []int{0, 12, 16, 24}) {
		t.Fatalf("offsets %v", offs)
	}
	fill := func(n int, v float32) []float32 { return slices.Repeat([]float32{v}, n) }
	tensors := []ingest.Tensor{ // a state_dict with an extra buffer, names out of order
		{Name: "head.bias", Shape: []int{2}, Data: fill(2, 4)},
		{Name: "body.weight", Shape: []int{4, 3}, Data: fill(12, 1)},
		{Name: "steps", Shape: []int{}, Data: []float32{9}},
		{Name: "body.bias", Shape: []int{4}, Data: fill(4, 2)},
		{Name: "head.weight", Shape: []int{2, 4}, Data: fill(8, 3)},
	}
	got, err := lay.Flatten(tensors, []string{"body.weight", "body.bias", "head.weight", "head.bias"})
	if err != nil {
		t.Fatal(err)
	}
	want26 := slices.Concat(fill(12, 1), fill(4, 2), fill(8, 3), fill(2, 4))
	if !slices.Equal(got, want26) {
		t.Fatalf("by names: %v", got)
	}
	if got, err = lay.Flatten([]ingest.Tensor{{Name: "flat", Shape: []int{26}, Data: want26}}, nil); err != nil || !slices.Equal(got, want26) {
		t.Fatalf("flat: %v %v", got, err)
	}
	if _, err = lay.Flatten(tensors, nil); err == nil || !strings.Contains(err.Error(), "5 tensors") {
		t.Fatalf("unnamed extra tensors: %v", err)
	}
	if _, err = lay.Flatten(tensors, []string{"body.weight", "body.bias", "head.weight", "nope"}); err == nil || !strings.Contains(err.Error(), `no tensor "nope"`) {
		t.Fatalf("unknown name: %v", err)
	}
	// safetensors' save_file lays tensors out by name (bias before weight): file order does
	// not fit, and the error says why and what to do.
	byName := []ingest.Tensor{tensors[3], tensors[1], tensors[0], tensors[4]}
	const hint = "in name order, as safetensors' save_file writes them"
	if _, err = lay.Flatten(byName, nil); err == nil || !strings.Contains(err.Error(), `tensor "body.bias" has shape [4], the model's layer 1 weight needs [4 3]`) || !strings.Contains(err.Error(), hint) {
		t.Fatalf("tensors in name order: %v", err)
	}
	// A file in another order gets no such hint.
	if _, err = lay.Flatten([]ingest.Tensor{tensors[1], tensors[0], tensors[3], tensors[4]}, nil); err == nil || strings.Contains(err.Error(), hint) {
		t.Fatalf("tensors out of order: %v", err)
	}
}

func TestManifestJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.json")
	os.WriteFile(path, []byte(`{"entries": [
		{"file": "a.npy", "world": "C", "pair": 0, "round": 0, "canary": false},
		{"file": "/abs/b.npy", "world": 1, "pair": 0, "round": 0}]}`), 0o644)
	m, err := ReadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 2 || m.Entries[0].File != filepath.Join(dir, "a.npy") || m.Entries[1].File != "/abs/b.npy" ||
		m.Entries[1].World != 1 || m.Entries[0].Canary == nil || *m.Entries[0].Canary || m.Entries[1].Client != -1 {
		t.Fatalf("entries %+v", m.Entries)
	}
	if _, err := m.Validate(Expect{Pairs: 1, Rounds: []int{0}, Clients: 1}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, []byte(`[{"file": "a.npy", "world": "C", "pair": 0}]`), 0o644)
	if _, err := ReadManifest(path); err == nil || !strings.Contains(err.Error(), "entry 0: file, world, pair and round are required") {
		t.Fatalf("missing round: %v", err)
	}
	os.WriteFile(path, []byte("file,world,pair,round,seed\n"), 0o644)
	if _, err := ReadManifest(path); err == nil || !strings.Contains(err.Error(), `unknown column "seed"`) {
		t.Fatalf("unknown column: %v", err)
	}
}

// A negative client, in a CSV or a JSON manifest, is an error naming the line: it must not be
// read as a global model (the empty or absent client).
func TestManifestRefusesNegativeClient(t *testing.T) {
	for name, raw := range map[string]string{
		"csv":  "file,world,pair,round,client\na.npy,C,0,1,-2\n",
		"json": `{"entries": [{"file": "a.npy", "world": "C", "pair": 0, "round": 1, "client": -5}]}`,
	} {
		_, err := parseManifest([]byte(raw))
		if err == nil || !strings.Contains(err.Error(), "is negative") {
			t.Errorf("%s: err %v, want a negative client refused", name, err)
		}
	}
}
