// Package importer turns model snapshots trained by another tool (PyTorch, JAX, ...) into a
// standard fedaudit experiment directory, so that the attack, analyze and report stages audit
// them unchanged. It owns the manifest (which file is which run, world and round), the parameter
// layout (which tensor is which part of a zoo model's flat parameter vector) and the validation
// of both; the byte formats are package ingest's, the run-file schema package runs'.
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
