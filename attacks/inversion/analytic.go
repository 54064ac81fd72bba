package inversion

import (
	"math"

	"github.com/fedaudit/fedaudit/attacks/hostmodel"
)

// Analytic recovers the input of a client's update u through the first dense layer of m (the
// caller checked m.FirstLayer): with one sample x, K local steps change the first layer's
// weight by (sum_k d_k) x^T and its bias by sum_k d_k, so every row j gives x = dW_j / db_j, and
// under noise the least-squares solution over all rows is x = dW^T db / (db^T db). It returns
// nil when the bias did not move.
func Analytic(m *hostmodel.Model, u []float64) []float64 {
	woff, boff, rows, in, _ := m.FirstLayer()
	db := u[boff : boff+rows]
	var bb float64
	for _, v := range db {
		bb += v * v
	}
	if !(bb > 0) || math.IsInf(bb, 0) {
		return nil
	}
	x := make([]float64, in)
	for j, b := range db {
		row := u[woff+j*in : woff+(j+1)*in]
		for i, v := range row {
			x[i] += b * v
		}
	}
	for i := range x {
		x[i] /= bb
	}
	return x
}
