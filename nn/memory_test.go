package nn

import "testing"

// DeviceMemory grows linearly in the replicas (every buffer but the shared ones is per
// replica), grows with the rows, and refuses counts below one.
func TestDeviceMemoryShape(t *testing.T) {
	spec := LeNet5(10, false)
	at := func(R, train, eval int) int64 {
		t.Helper()
		v, err := DeviceMemory(spec, R, train, eval)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, b, c := at(2, 16, 32), at(4, 16, 32), at(6, 16, 32)
	if b-a != c-b || b <= a {
		t.Errorf("values at 2, 4, 6 replicas: %d, %d, %d: not linear and increasing", a, b, c)
	}
	if at(2, 16, 64) <= a || at(2, 8, 32) > a {
		t.Errorf("more evaluation rows must cost more, fewer training rows no more")
	}
	for _, bad := range [][3]int{{0, 16, 32}, {2, 0, 32}, {2, 16, 0}} {
		if _, err := DeviceMemory(spec, bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("DeviceMemory(%v): no error", bad)
		}
	}
}

// A convolution's backward pass uses its patch gradients and weight gradient only within the
// call, and the model's layers share those buffers: one more layer of a deep network adds what
// that layer keeps between calls (its patches, output, input gradient and [weights | bias]
// copy) and not another set of them (on ResNet-18 at 32 x 32 they are about 530 MB a replica
// over all layers when each layer keeps its own).
func TestDeviceMemorySharesBackwardBuffers(t *testing.T) {
	const R, rows, c, hw = 2, 16, 8, 16
	convs := func(k int) int64 {
		t.Helper()
		spec := Spec{Kind: "sequential", Input: []int{c, hw, hw}}
		for range k {
			spec.Layers = append(spec.Layers, LayerSpec{Kind: "conv2d", Out: c, Kernel: 3, Padding: 1})
		}
		spec.Layers = append(spec.Layers, LayerSpec{Kind: "flatten"}, LayerSpec{Kind: "dense", Out: 10})
		v, err := DeviceMemory(spec, R, rows, rows)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	kk, n := c*3*3, rows*hw*hw
	keeps := int64(R * ((kk+1)*n + c*n + c*hw*hw*rows + c*(kk+1))) // patches, output, input gradient, [w | b]
	for k := 2; k <= 4; k++ {
		if d := convs(k+1) - convs(k); d != keeps {
			t.Errorf("conv layer %d adds %d floats, want %d (what it keeps; its patch gradients are %d more)", k+1, d, keeps, R*kk*n)
		}
	}
}

// With its 3 x 3 convolutions by Winograd's F(2x2, 3x3) (F(4x4, 3x3)) a layer keeps, between
// the passes, its transformed input (16 Cin values a 2 x 2 tile; 36 a 4 x 4 tile), its output
// and its input gradient; the filters' transforms, the products and their gradients are the
// shared transients. So one more layer adds exactly that. DeviceMemory is the largest of the
// three forms: here the patches' (9 Cin + 1 values a pixel kept), and for a layer of few
// pixels and many channels, whose transformed filters (16 or 36 Cout Cin a replica) outweigh
// its patches, F(4x4, 3x3)'s.
func TestDeviceMemoryOfEachForm(t *testing.T) {
	const R, rows = 2, 16
	spec := func(c, hw, k int) Spec {
		s := Spec{Kind: "sequential", Input: []int{c, hw, hw}}
		for range k {
			s.Layers = append(s.Layers, LayerSpec{Kind: "conv2d", Out: c, Kernel: 3, Padding: 1})
		}
		s.Layers = append(s.Layers, LayerSpec{Kind: "flatten"}, LayerSpec{Kind: "dense", Out: 10})
		return s
	}
	count := func(s Spec, form ConvForm) int64 {
		t.Helper()
		v, err := DeviceMemoryOf(s, R, rows, rows, form)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const c, hw = 16, 16
	n := rows * hw * hw
	for _, f := range []struct {
		form        ConvForm
		tile, alpha int
	}{{WinogradConvForm, 2, 4}, {Winograd4ConvForm, 4, 6}} {
		// transformed input, output, input gradient
		keeps := int64(R * (f.alpha*f.alpha*c*(hw/f.tile)*(hw/f.tile)*rows + c*n + c*n))
		for k := 2; k <= 4; k++ {
			if d := count(spec(c, hw, k+1), f.form) - count(spec(c, hw, k), f.form); d != keeps {
				t.Errorf("F(%dx%[1]d, 3x3): conv layer %d adds %d floats, want %d", f.tile, k+1, d, keeps)
			}
		}
	}
	for _, tc := range []struct {
		name       string
		s          Spec
		largest    ConvForm
		wino4Least bool // F(4x4, 3x3) below F(2x2, 3x3)
	}{
		{"16 channels of 16 x 16", spec(16, 16, 3), PatchConvForm, true},
		{"256 channels of 2 x 2", spec(256, 2, 3), Winograd4ConvForm, false},
	} {
		patch, wino, wino4, either := count(tc.s, PatchConvForm), count(tc.s, WinogradConvForm), count(tc.s, Winograd4ConvForm), count(tc.s, AnyConvForm)
		largest := map[ConvForm]int64{PatchConvForm: patch, WinogradConvForm: wino, Winograd4ConvForm: wino4}[tc.largest]
		if either != max(patch, wino, wino4) || largest != either || (wino4 < wino) != tc.wino4Least {
			t.Errorf("%s: patches %d, F(2x2, 3x3) %d, F(4x4, 3x3) %d, any %d: want any the largest, form %d's", tc.name, patch, wino, wino4, either, tc.largest)
		}
		if v, _ := DeviceMemory(tc.s, R, rows, rows); v != either {
			t.Errorf("%s: DeviceMemory %d, the count of either form %d", tc.name, v, either)
		}
	}
}

// WinogradConvolutions counts the convolutions a GPU runs by F(2x2, 3x3): ResNet-18's 3 x 3 ones
// at stride 1 (all but the stem and the three that halve the image), none of LeNet-5's (5 x 5)
// or of a ResNet too narrow for the form (compute.WinogradFits: 16 channels or more).
func TestWinogradConvolutions(t *testing.T) {
	resnet18 := ResNet(4, 2, 64, 32, 10)
	resnet18.Input = []int{3, 32, 32}
	narrow := ResNet(2, 1, 4, 2, 10)
	narrow.Input = []int{3, 16, 16}
	for _, tc := range []struct {
		name string
		spec Spec
		want int
	}{
		{"resnet-18", resnet18, 13},
		{"lenet-5", LeNet5(10, false), 0},
		{"resnet of widths 4 and 8", narrow, 0},
	} {
		if got, err := WinogradConvolutions(tc.spec); err != nil || got != tc.want {
			t.Errorf("%s: %d convolutions by Winograd's form (err %v), want %d", tc.name, got, err, tc.want)
		}
	}
}
