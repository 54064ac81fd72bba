"""Writes the fixtures of ingest's tests with numpy (Debian's python3-numpy):
every array holds ramp(n) = arange(n) * 0.5 - 1 in C order. Run from ingest/testdata."""
import json, struct
import numpy as np

def ramp(*shape):
    return (np.arange(int(np.prod(shape))) * 0.5 - 1).reshape(shape)

np.save("c_f4_v1.npy", ramp(2, 3).astype("<f4"))
np.save("fortran_f4.npy", np.asfortranarray(ramp(3, 4).astype("<f4")))
np.save("big_f8.npy", ramp(2, 2, 3).astype(">f8"))
with open("v2_f4.npy", "wb") as f:
    np.lib.format.write_array(f, ramp(5).astype("<f4"), version=(2, 0))
with open("v3_f8_fortran.npy", "wb") as f:
    np.lib.format.write_array(f, np.asfortranarray(ramp(2, 3)), version=(3, 0))
np.savez("arrays.npz", weight=ramp(2, 3).astype("f4"), bias=ramp(2).astype("f4"))
np.savez_compressed("arrays_compressed.npz", weight=ramp(2, 3), bias=ramp(2).astype("f4"))

# safetensors by hand: header JSON, padded with spaces to 8 bytes, then raw little-endian data.
tensors = {"weight": ramp(2, 3).astype("<f4"), "bias": ramp(2).astype("<f2")}
header, off, blobs = {}, 0, []
for name, a in tensors.items():
    b = a.tobytes()
    header[name] = {"dtype": {"float32": "F32", "float16": "F16"}[a.dtype.name], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
    off += len(b)
    blobs.append(b)
header["__metadata__"] = {"format": "pt"}
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
with open("model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
