#!/usr/bin/env python3
"""sass-loops.py: the loops of a compiled kernel, for counting what a change to a kernel that is
bound by its instruction count does without a GPU (docs/gpu.md, "The fused hidden step").

Usage:
  nvcc -cubin -arch=sm_90 -fmad=false -O3 -lineinfo -o step.cubin kernels/step.cu
  tools/bench/sass-loops.py step.cubin [--max N]
(nvcc 11.8 crashes on kernels/conv.cu with -lineinfo for sm_90: compile it without, and the
loops are listed by kernel with no source lines.)

It disassembles the cubin with `nvdisasm -g -c` (the source line of every instruction) and
prints, for every loop of at most N instructions (default 400; a loop is a backward branch and
the instructions from its target to it), its kernel, its first address, its length, its floating-point
operations (FFMA, DFMA, FADD, DADD, FMUL, DMUL: one per instruction), its loads and stores, the
source lines it comes from, and each local-memory access (a register spill: LDL, STL) inside
it. Times a loop's trip count, its length is what a thread issues in it.
"""
import collections
import re
import subprocess
import sys

FLOAT_OPS = ("FFMA", "DFMA", "FADD", "DADD", "FMUL", "DMUL")
MEMORY_OPS = ("LD", "LDS", "LDG", "ST", "STS", "STG", "LDL", "STL")


def instructions(cubin):
    """The cubin's instructions as (address, text, source line, kernel), and its labels' indices."""
    try:
        run = subprocess.run(["nvdisasm", "-g", "-c", cubin], capture_output=True, text=True)
    except FileNotFoundError:
        sys.exit("sass-loops: nvdisasm not found (it comes with the CUDA toolkit, beside nvcc)")
    if run.returncode != 0:
        sys.exit(f"sass-loops: nvdisasm could not read {cubin}: {run.stderr.strip() or 'exit ' + str(run.returncode)}")
    text = run.stdout
    line, out, labels, kernel = None, [], {}, None
    for raw in text.splitlines():
        m = re.match(r"^\s*\.text\.(\S+):", raw)
        if m:
            kernel = m.group(1)
            continue
        m = re.search(r'//## File "[^"]+", line (\d+)', raw)
        if m:
            line = int(m.group(1))
            continue
        m = re.match(r"^\s*\.(L_x_\d+):", raw)
        if m:
            labels[m.group(1)] = len(out)
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", raw)
        if m:
            out.append((int(m.group(1), 16), m.group(2), line, kernel))
    return out, labels


def opcode(text):
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 2
    most = 400
    if "--max" in argv:
        i = argv.index("--max")
        if i + 1 >= len(argv) or not argv[i + 1].isdigit():
            print("sass-loops: --max takes a number of instructions", file=sys.stderr)
            return 2
        most = int(argv[i + 1])
    ins, labels = instructions(argv[1])
    loops = []
    for i, (_, text, _, _) in enumerate(ins):
        m = re.search(r"BRA\s+(?:!?U?P\w+,\s*)?`\(\.(L_x_\d+)\)", text)  # BRA P5, `(...)` too
        if m and m.group(1) in labels and labels[m.group(1)] <= i:
            loops.append((labels[m.group(1)], i))
    for start, end in sorted(loops):
        body = ins[start : end + 1]
        if len(body) > most:
            continue
        ops = collections.Counter(opcode(t) for _, t, _, _ in body)
        flops = sum(ops[k] for k in FLOAT_OPS)
        memory = sum(ops[k] for k in MEMORY_OPS)
        lines = sorted({ln for _, _, ln, _ in body if ln is not None})
        print(f"{body[0][3]} {body[0][0]:#07x} n={len(body):4d} flop={flops:3d} mem={memory:3d} lines={lines[:8]}")
        for addr, text, ln, _ in body:
            if opcode(text) in ("LDL", "STL"):
                print(f"    spill {addr:#07x} line {ln}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
