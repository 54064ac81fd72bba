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
