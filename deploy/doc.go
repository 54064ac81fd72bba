// Package deploy holds the files that run fedaudit on clusters: Slurm batch scripts
// (deploy/slurm), Kubernetes manifests (deploy/k8s) and the GPU container image
// (deploy/docker). It has no code of its own; its tests check that the manifests and the
// Dockerfile carry what the audit command relies on, since no cluster or container engine runs
// in the project's tests (deploy/slurm/test-slurm.sh runs a real Slurm in CI).
package deploy
