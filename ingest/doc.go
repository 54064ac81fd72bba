// Package ingest reads model snapshots written by other tools: safetensors files, NumPy .npy
// arrays and .npz archives of them. It owns those byte formats and nothing else: it turns a file
// into named float32 tensors (Tensor) and says clearly, naming the file and the tensor, what is
// wrong with one it cannot read. It never panics on outside data and refuses sizes that do not
// fit the file before allocating for them (tested by fuzzing every parser).
//
// What the tensors mean (which model parameter, which run and round) is decided elsewhere: the
// importer (package importer) maps them onto a model's flat parameter vector with a layout and a
// manifest. The writers here (WriteNPY, WriteNPZ, WriteSafetensors) exist for tests and for handing
// data to external trainers (package dataexport); they write the same formats the readers accept.
// Data files hold integer tensors (labels) too: ParseData and ReadDataFile read those, while the
// snapshot readers refuse them.
package ingest
