// Package inversion reconstructs a client's input from its update, the mathematics behind the
// attacks' inversion and invgrad: the analytic recovery through a dense first layer (Analytic)
// and Inverting Gradients (Geiping et al. 2020; Reconstruct), cosine matching of the update
// through the client's K unrolled local steps with a total-variation prior, minimized by signed
// Adam over the box [0, 1]^d from seeded restarts, on host MLPs (exact Hessian-vector products)
// and CNNs (finite-difference products). It also scores a reconstruction against the true sample
// (Metrics: MSE, PSNR, windowed SSIM, L2).
//
// A problem holds only what the server knows of an upload; the ground truth never reaches the
// optimizer, and the restart of least objective wins.
package inversion
