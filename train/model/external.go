package model

import "errors"

// External is the model kind of runs trained elsewhere with an architecture fedaudit does not
// model: their parameters are imported as flat vectors (audit import) and audited by the attacks
// that need no model. Such a config validates, so that every stage after training reads it, but
// it is never trained: building its model fails with ErrExternal.
const External = "external"

// ErrExternal is the error of building (training, sizing, evaluating) a model of kind External.
var ErrExternal = errors.New("model kind external: the architecture is unknown to fedaudit, so it cannot train or evaluate it; train elsewhere and import the snapshots (audit import)")
