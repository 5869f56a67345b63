"""The binary's dumps read by hand (no safetensors package on the test
hosts) and put in the reference's layout."""

import json
import struct

import numpy as np


# --------------------------------------------------------------------------
# safetensors, read by hand: the package is not installed on the test hosts.


def _bf16_to_f32(raw):
    # bfloat16 is the top half of a float32.
    return (raw.astype(np.uint32) << 16).view(np.float32)


_ST_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
}


def read_safetensors_header(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("%s: shorter than the 8-byte header length" % path)
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError("%s: header length %d past end of file" % (path, header_len))
    return blob, header_len, json.loads(blob[8:8 + header_len].decode("utf-8"))


def read_safetensors_metadata(path):
    return read_safetensors_header(path)[2].get("__metadata__", {})


def read_safetensors(path):
    """Return {name: (dtype string, numpy array)}; __metadata__ is skipped."""
    blob, header_len, header = read_safetensors_header(path)
    data = memoryview(blob)[8 + header_len:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _ST_DTYPES:
            raise ValueError("%s: %s has unsupported dtype %s" % (path, name, dtype))
        np_dtype = _ST_DTYPES[dtype]
        shape = [int(d) for d in info["shape"]]
        begin, end = info["data_offsets"]
        expected = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
        if end - begin != expected or end > len(data):
            raise ValueError("%s: %s has bad data_offsets %s for shape %s %s"
                             % (path, name, info["data_offsets"], shape, dtype))
        array = np.frombuffer(data[begin:end], dtype=np_dtype).reshape(shape)
        if dtype == "BF16":
            array = _bf16_to_f32(array)
        tensors[name] = (dtype, array.copy())
    return tensors


def rope_layout(metadata):
    """The q/k row layout of a file (src/io/hf_weights.h): rotate_half unless
    it says otherwise or tinyllama wrote it before recording the layout."""
    if "rope_layout" in metadata:
        return metadata["rope_layout"]
    return "interleaved" if metadata.get("producer") == "tinyllama" else "rotate_half"


def to_interleaved(tensors, cfg, layout):
    """q_proj/k_proj rows from Hugging Face's rotate-half order back to the
    interleaved RoPE pairs this script's model (DESIGN.md) computes with:
    row j of a head holds interleaved row 2j (j < hd/2) or 2(j - hd/2) + 1."""
    if layout == "interleaved":
        return tensors
    if layout != "rotate_half":
        raise ValueError("unknown rope_layout %r" % layout)
    hd = cfg["dim"] // cfg["heads"]
    order = np.empty(hd, dtype=np.int64)  # order[interleaved row] = rotate-half row
    for j in range(hd):
        order[2 * j if j < hd // 2 else 2 * (j - hd // 2) + 1] = j
    out = dict(tensors)
    for name, (dtype, a) in tensors.items():
        if name.endswith("self_attn.q_proj.weight") or name.endswith("self_attn.k_proj.weight"):
            heads = a.reshape(-1, hd, a.shape[1])
            out[name] = (dtype, heads[:, order, :].reshape(a.shape).copy())
    return out
