// Package importer turns model snapshots trained by another tool (PyTorch, JAX, ...) into a
// standard fedaudit experiment directory, so that the attack, analyze and report stages audit
// them unchanged. It owns the manifest (which file is which run, world and round, and which is
// the target client's upload), the parameter layout (which tensor is which part of the model's
// flat parameter vector, in PyTorch's state_dict order, for fedaudit's models and, taken from
// the snapshots, for models of unknown architecture) and the validation of both. The statistics
// a run file carries beside the parameters come from train's own code: the target's loss and
// margin by train.Evaluate, the informed adversary's ratios by replaying the imported rounds with
// train.ReplayRound (replay.go). The byte formats are package ingest's, the run-file schema
// package runs'.
//
// An import is all or nothing: everything is written into a hidden temporary directory beside
// the destination, which is renamed into place only when every snapshot has been read, checked
// and written. docs/import.md describes the manifest and the threat model of imported runs.
package importer

// InputError marks a problem with what was given to import (manifest, snapshots, their shapes
// or values), as opposed to a failure of the machine; the CLI exits with status 2 for it.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }
