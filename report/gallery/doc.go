// Package gallery draws the reconstructions of the reconstructing attacks (package findings'
// Gallery) as PNG images: the sample that differs between the worlds beside what the attacks
// made of it, for one experiment (PNG: a row per checkpoint T, a column per world and attack)
// or for one attack across experiments (Comparison: a row per experiment, a column per T).
//
// Tiles are the samples enlarged by an integer factor with nearest-neighbour pixels (no
// smoothing that would flatter a reconstruction), values clipped to [0, 1]; one channel is
// grey, three are RGB, others are shown as their channel mean. Each image carries its own
// title and a key (it is linked and copied on its own); text is set in the Go fonts
// (golang.org/x/image/font/gofont) by the pure-Go rasterizer, so the bytes depend on the data
// alone. Package report places these images in its report and comparison files.
package gallery
