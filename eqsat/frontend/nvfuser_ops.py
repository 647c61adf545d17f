"""The names nvFuser's frontends have: the ops of ``fd.ops`` and the recording calls of ``fd``.

Data taken from nvFuser's source (github.com/NVIDIA/Fuser), not from an installed nvFuser:

- :data:`CLASSIC_OPS`: the classic frontend (``nvfuser``) at 0.2.35, its last version
  (commit 4a3e6b9a452aa3bce1c1576f4bf94136d73650e9, the parent of 3925c6fd2 "Remove legacy
  bindings", which removed it at 0.2.36): every name bound on ``FusionDefinition.Operators`` in
  ``python/python_frontend/python_bindings.cpp`` (``nvf_ops.def("name", ...)`` and the
  ``NVFUSER_PYTHON_BINDING_*`` macros' name arguments).
- :data:`DIRECT_OPS`: the direct frontend (``nvfuser_direct``) at 0.2.36 (commit
  3925c6fd2742b43433b79fbe12ac6dbf3a93604a; ``python/python_direct/ops.cpp`` is the same at
  0.2.35): every name bound on the ``ops`` submodule there (``ops.def("name", ...)`` and the
  ``NVFUSER_DIRECT_BINDING_*`` macros' name arguments).
- :data:`RECORDING_CALLS`: the methods of each frontend's ``FusionDefinition`` that add to the
  definition (``fd.ops`` and the ``define_*``/``add_output`` calls; ``from_pytorch`` defines a
  tensor input like a given tensor). Its other methods (``execute``, ``validate``,
  ``fusion_ir``...) run or inspect a definition.
"""

from __future__ import annotations

import difflib

# the ops both frontends have
_SHARED = """
    abs acos acosh add addcmul argsort asin asinh atan atan2 atanh bitwise_and
    bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift bitwise_xor broadcast
    broadcast_in_dim cast cat ceil clamp cos cosh cumsum cutlass_nvfp4_grouped_mm div
    embedding_fwd eq erf erfc erfcinv erfinv exp exp2 expand expm1 floor fmod frac full gather
    gcd ge grouped_mm gt imag index_select iota isfinite isinf isnan isneginf isposinf isreal le
    lerp lgamma linear log log10 log1p log2 logical_and logical_not logical_or
    logical_right_shift lt matmul max maximum min minimum mod mul ne neg nextafter normal pad
    permute pow prod rand_like randn_like real reciprocal relu remainder reshape round rsqrt
    scaled_mm scatter sdpfa_bwd sdpfa_fwd segment_set select set shape sigmoid sign signbit silu
    sin sinh size slice sqrt squeeze stride_order sub sum take_along_axis tan tanh threshold
    topk triu truediv trunc uniform var var_mean welford where
""".split()
CLASSIC_OPS = (
    *_SHARED,
    *"""
    add_alpha at batch_norm index_put_accumulate sub_alpha tensor_sizes
""".split(),
)
DIRECT_OPS = (
    *_SHARED,
    *"""
    complex cummax cummin cumprod nv_block_quantize nv_grouped_block_quantize
    preprocess_grouped_matmul_input_sf
""".split(),
)

OPS_BY_FRONTEND = {"nvfuser": frozenset(CLASSIC_OPS), "nvfuser_direct": frozenset(DIRECT_OPS)}
ANY_FRONTEND_OPS = frozenset(CLASSIC_OPS) | frozenset(DIRECT_OPS)

RECORDING_CALLS = {
    "nvfuser": (
        "ops",
        "define_tensor",
        "define_scalar",
        "define_constant",
        "define_vector",
        "add_output",
        "from_pytorch",
    ),
    "nvfuser_direct": (
        "ops",
        "define_tensor",
        "define_scalar",
        "define_vector",
        "add_output",
        "from_pytorch",
    ),
}
ANY_RECORDING_CALL = frozenset(name for names in RECORDING_CALLS.values() for name in names)


def ops_of(frontend: str | None) -> frozenset[str]:
    """The op names ``fd.ops`` has in ``frontend`` (None or another name: in either frontend)."""
    return OPS_BY_FRONTEND.get(frontend or "", ANY_FRONTEND_OPS)


def unknown_op(name: str, frontend: str | None) -> str | None:
    """None where ``fd.ops.<name>`` exists in ``frontend`` (None: either); else what is wrong,
    in the user's terms: the frontend that has it instead, or the closest names."""
    known = ops_of(frontend)
    if name in known:
        return None
    if name in ANY_FRONTEND_OPS:
        other = next(f for f, ops in OPS_BY_FRONTEND.items() if name in ops)
        return f"{name} is an op of {other}, not of {frontend} (the frontend this definition is written for)"
    close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    where = f"nvFuser's {frontend} frontend" if frontend else "nvFuser"
    return f"{where} has no op {name}{hint}"
