"""Grouped-query attention with its key-value heads as they are: the rewrite of a Thunder trace
that hands eqsat's cuDNN attention the keys and values before their repeat to every head.

Models with fewer key-value heads than query heads (Llama, Qwen2, Mistral) call attention, in
transformers' sdpa path with a mask, on keys and values repeated to every query head
(``repeat_kv``: ``x[:, :, None].expand(b, hk, r, s, d).reshape(b, hk * r, s, d)``). Thunder
0.2.6's ``scaled_dot_product_attention`` takes no ``enable_gqa``, so its trace writes the
repeated keys and values (an nvFuser kernel each), saves them for the backward, and sums the
gradients of the repeats back to the groups (another kernel). cuDNN's attention takes the
groups as they are (query head ``i`` reads key-value head ``i // r``, as ``repeat_kv`` makes
them), forward and backward, and returns the gradients of the groups.

:func:`rewrite` finds each ``scaled_dot_product_attention`` whose key and value are such
repeats (:func:`repeated_from`, by the ops' names and shapes) and that ``takes`` accepts, and
replaces it with ``grouped`` called on the groups. Thunder's dead-code pass then drops the
repeats no other op reads. It runs on the computation trace before autodiff
(``Optimize.transform_traces_pre_prologue``), so the backward is the grouped op's own. Thunder
is not imported here: the trace's BoundSymbols are read by their ``sym.id``/``sym.name``,
``args``, ``kwargs`` and proxies' ``shape`` and ``name``.
"""

from __future__ import annotations

from typing import Any, Callable

SDPA_ID = "torch.nn.functional.scaled_dot_product_attention"
_PARAMETERS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")
_DEFAULTS = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None}
_UNSQUEEZES = ("getitem", "unsqueeze")
_RESHAPES = ("reshape", "view")


def sdpa_arguments(bsym) -> dict | None:
    """The arguments of a ``scaled_dot_product_attention`` BoundSymbol by name; None where
    they are not the ones torch's signature names."""
    if len(bsym.args) > len(_PARAMETERS):
        return None
    positional = dict(zip(_PARAMETERS, bsym.args))
    if any(n in positional or n not in (*_PARAMETERS, "scale") for n in bsym.kwargs):
        return None
    bound = {**_DEFAULTS, **positional, **bsym.kwargs}
    return bound if all(p in bound for p in _PARAMETERS[:3]) else None


def _shape(proxy) -> tuple | None:
    shape = getattr(proxy, "shape", None)
    return None if shape is None else tuple(shape)


def _full_slice(item) -> bool:
    return isinstance(item, slice) and item == slice(None, None, None)


def _inserts_axis_2(bsym, rank: int) -> bool:
    """Whether ``bsym`` (a getitem or unsqueeze of a ``rank``-d tensor) only inserts a new axis
    at position 2."""
    if bsym.sym.name == "unsqueeze":
        dim = bsym.args[1] if len(bsym.args) > 1 else bsym.kwargs.get("dim")
        return isinstance(dim, int) and dim in (2, 2 - (rank + 1))
    key = bsym.args[1] if len(bsym.args) > 1 else None
    key = list(key) if isinstance(key, tuple) else [key]
    if key.count(Ellipsis) > 1:
        return False
    if Ellipsis in key:
        at = key.index(Ellipsis)
        fill = rank - sum(1 for k in key if k is not None and k is not Ellipsis)
        key[at : at + 1] = [slice(None)] * fill
    key += [slice(None)] * (rank + 1 - len(key))
    return (
        len(key) == rank + 1 and key[2] is None and all(_full_slice(k) for i, k in enumerate(key) if i != 2)
    )


def repeated_from(proxy, producers: dict) -> tuple[Any, int] | None:
    """``(x, r)`` where ``proxy`` [b, hk * r, s, d] is ``x`` [b, hk, s, d] with each head
    repeated ``r`` times in a row, made as ``repeat_kv`` makes it (an axis inserted at 2,
    expanded to ``r``, merged into the heads); else None. ``producers`` maps a proxy's name to
    the BoundSymbol that made it."""
    reshape = producers.get(getattr(proxy, "name", None))
    if reshape is None or reshape.sym.name not in _RESHAPES or not reshape.args:
        return None
    expanded = reshape.args[0]
    expand = producers.get(getattr(expanded, "name", None))
    if expand is None or expand.sym.name != "expand" or not expand.args:
        return None
    inserted = expand.args[0]
    insert = producers.get(getattr(inserted, "name", None))
    if insert is None or insert.sym.name not in _UNSQUEEZES or not insert.args:
        return None
    x = insert.args[0]
    out, big, one, small = (_shape(p) for p in (proxy, expanded, inserted, x))
    if None in (out, big, one, small) or len(small) != 4 or len(big) != 5:
        return None
    b, hk, s, d = small
    r = big[2]
    if not (
        isinstance(r, int)
        and r > 1
        and one == (b, hk, 1, s, d)
        and big == (b, hk, r, s, d)
        and out == (b, hk * r, s, d)
        and _inserts_axis_2(insert, 4)
    ):
        return None
    return x, r


def rewrite(trace_bsyms: list, grouped: Callable, takes: Callable) -> tuple[list, list[tuple[int, int]]]:
    """``trace_bsyms`` with each ``scaled_dot_product_attention`` on repeated keys and values
    (:func:`repeated_from`, the same repeat for both) that ``takes(query, key, value,
    attn_mask, dropout_p)`` accepts for the groups replaced by ``grouped(query, key, value,
    attn_mask, dropout_p, is_causal, scale)`` bound to the same output; and, per call
    rewritten, (query heads, key-value heads). ``grouped`` is a Thunder Symbol (its ``bind``)."""
    producers = {}
    out, calls = [], []
    for bsym in trace_bsyms:
        new = bsym
        if bsym.sym.id == SDPA_ID and (args := sdpa_arguments(bsym)) is not None:
            key, value = (repeated_from(args[n], producers) for n in ("key", "value"))
            if key is not None and value is not None and key[1] == value[1]:
                q, k, v = args["query"], key[0], value[0]
                if takes(q, k, v, args["attn_mask"], args["dropout_p"]):
                    new = grouped.bind(
                        q,
                        k,
                        v,
                        args["attn_mask"],
                        args["dropout_p"],
                        args["is_causal"],
                        args["scale"],
                        output=bsym.output,
                    )
                    calls.append((_shape(q)[1], _shape(k)[1]))
        for p in bsym.flat_proxy_outs:
            producers[p.name] = bsym
        out.append(new)
    return out, calls
