"""eqsat.thunder.grouped_attention without Thunder: which attention calls on repeated keys and
values run on the groups as they are. The trace is made of stand-ins with what the rewrite
reads of Thunder's BoundSymbols (``sym.id``/``sym.name``, ``args``, ``kwargs``, outputs) and
proxies (``name``, ``shape``); tests/test_thunder_grouped_attention.py runs the real thing on
the GPU against eager PyTorch."""

from types import SimpleNamespace

import pytest

import eqsat.thunder.grouped_attention as ga

B, HK, S, D = 2, 4, 128, 64
ALL = slice(None)


class Trace:
    """A trace of stand-in BoundSymbols, each op a method returning its output proxy."""

    def __init__(self):
        self.bsyms, self.n = [], 0

    def proxy(self, shape):
        self.n += 1
        return SimpleNamespace(name=f"t{self.n}", shape=tuple(shape))

    def op(self, name, args, shape, *, sym_id=None, kwargs=None):
        out = self.proxy(shape)
        self.bsyms.append(
            SimpleNamespace(
                sym=SimpleNamespace(name=name, id=sym_id or f"torch.{name}"),
                args=tuple(args),
                kwargs=kwargs or {},
                output=out,
                flat_proxy_outs=(out,),
            )
        )
        return out

    def repeat_kv(self, x, r, *, insert=("getitem", (ALL, ALL, None, ALL, ALL)), axis=2):
        """transformers' repeat_kv (axis 2), or the same ops inserting the axis elsewhere."""
        b, hk, s, d = x.shape
        one = [b, hk, s, d]
        one.insert(axis, 1)
        t = self.op(insert[0], (x, insert[1]), one)
        big = list(one)
        big[axis] = r
        t = self.op("expand", (t, *big), big)
        return self.op("reshape", (t, (b, hk * r, s, d)), (b, hk * r, s, d))

    def sdpa(self, q, k, v, *args, **kwargs):
        shape = (*q.shape[:3], v.shape[3])
        return self.op(
            "scaled_dot_product_attention", (q, k, v, *args), shape, sym_id=ga.SDPA_ID, kwargs=kwargs
        )


class Grouped:
    """Stands in for the grouped Symbol: ``bind`` records what it was called with."""

    def bind(self, *args, output):
        return SimpleNamespace(
            sym=SimpleNamespace(name="grouped", id="grouped"),
            args=args,
            kwargs={},
            output=output,
            flat_proxy_outs=(output,),
        )


def takes_all(*args):
    return True


def attention(r=4, **repeat):
    t = Trace()
    q = t.proxy((B, HK * r, S, D))
    k, v = t.proxy((B, HK, S, D)), t.proxy((B, HK, S, D))
    out = t.sdpa(q, t.repeat_kv(k, r, **repeat), t.repeat_kv(v, r, **repeat), None, 0.0, scale=0.125)
    return t, q, k, v, out


def test_attention_on_keys_and_values_repeated_as_repeat_kv_makes_them_runs_on_the_groups():
    t, q, k, v, out = attention()
    bsyms, calls = ga.rewrite(t.bsyms, Grouped(), takes_all)
    assert calls == [(16, 4)]
    last = bsyms[-1]
    assert last.sym.name == "grouped" and last.output is out
    # query, the groups, the mask, dropout, is_causal, scale
    assert last.args == (q, k, v, None, 0.0, False, 0.125)
    assert bsyms[:-1] == t.bsyms[:-1]  # the repeats stay: Thunder's dead-code pass drops them


@pytest.mark.parametrize(
    "insert",
    [
        ("unsqueeze", 2),
        ("unsqueeze", -3),
        ("getitem", (Ellipsis, None, ALL, ALL)),
        ("getitem", (ALL, ALL, None)),
    ],
)
def test_the_inserted_axis_may_be_written_as_unsqueeze_or_any_index_that_puts_it_at_2(insert):
    t, *_ = attention(insert=insert)
    assert ga.rewrite(t.bsyms, Grouped(), takes_all)[1] == [(16, 4)]


@pytest.mark.parametrize(
    "insert, axis",
    [
        (("getitem", (ALL, None, ALL, ALL, ALL)), 1),  # x[:, None]: the groups tiled, not each repeated
        (("unsqueeze", 1), 1),
        (("getitem", (ALL, ALL, None, slice(0, 64), ALL)), 2),  # a slice beside the new axis
        (("getitem", (ALL, ALL, None, ALL, ALL)), 3),  # shapes of an axis inserted at 3
    ],
)
def test_a_repeat_that_is_not_each_head_in_a_row_stays_as_it_is(insert, axis):
    t, *_ = attention(insert=insert, axis=axis)
    bsyms, calls = ga.rewrite(t.bsyms, Grouped(), takes_all)
    assert calls == [] and bsyms == t.bsyms


def test_keys_and_values_repeated_differently_or_not_at_all_stay_as_they_are():
    t = Trace()
    q = t.proxy((B, 16, S, D))
    k, v = t.proxy((B, 4, S, D)), t.proxy((B, 2, S, D))
    t.sdpa(q, t.repeat_kv(k, 4), t.repeat_kv(v, 8))
    v16 = t.proxy((B, 16, S, D))
    t.sdpa(q, t.repeat_kv(k, 4), v16)
    bsyms, calls = ga.rewrite(t.bsyms, Grouped(), takes_all)
    assert calls == [] and bsyms == t.bsyms


def test_a_call_the_executor_does_not_take_stays_as_it_is():
    seen = []

    def takes(q, k, v, mask, dropout_p):
        seen.append((q.shape, k.shape, v.shape, mask, dropout_p))
        return False

    t, q, k, v, _ = attention()
    bsyms, calls = ga.rewrite(t.bsyms, Grouped(), takes)
    assert calls == [] and bsyms == t.bsyms
    assert seen == [((B, 16, S, D), (B, HK, S, D), (B, HK, S, D), None, 0.0)]


def test_keyword_arguments_are_read_by_name_and_unknown_ones_leave_the_call():
    t = Trace()
    q = t.proxy((B, 8, S, D))
    k, v, mask = t.proxy((B, 4, S, D)), t.proxy((B, 4, S, D)), t.proxy((1, 1, S, S))
    kr, vr = t.repeat_kv(k, 2), t.repeat_kv(v, 2)
    t.sdpa(q, kr, vr, attn_mask=mask, is_causal=False, scale=None)
    t.sdpa(q, kr, vr, enable_gqa=True)  # not Thunder 0.2.6's: left alone
    bsyms, calls = ga.rewrite(t.bsyms, Grouped(), takes_all)
    assert calls == [(8, 4)]
    assert bsyms[-2].args == (q, k, v, mask, 0.0, False, None)
    assert bsyms[-1] is t.bsyms[-1]
