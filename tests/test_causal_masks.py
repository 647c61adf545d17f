"""Causal masks known by how they were made (eqsat.ir.call_invariant,
eqsat.thunder.causal_masks): which outputs of a region are the same at every call, the check of
such an output against the lower triangle, the mark the region hook sets, and attention run
causal for a marked mask. References: masks and attention written by hand in torch."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

import eqsat
from eqsat.ir.call_invariant import call_invariant_outputs
from eqsat.thunder import Options, RegionHook, ThunderReport
from eqsat.thunder.causal_masks import is_causal_pattern, is_marked, live_marks, mark
from eqsat.thunder.cudnn_attention import mask_arguments
from thunder_stand_in import FakeThunderRegion

HEADER = "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\n\n"

# Thunder's Phi-3 forward region makes its mask so (../shared/corpus_thunder/thunder_phi3_00):
# iota, broadcast both ways, le, expand to the batch; here beside a value from the input and,
# where ``padding``, the mask and-ed with an input (a padding mask: it varies between calls)
MASK_REGION = (
    "    tv0 = fd.define_tensor(shape=[2, {n}], contiguity=[True, True], dtype=DataType.Bool, is_cpu=False)\n"
    "    tv1 = fd.ops.iota(length={n}, start=0, step=1)\n"
    "    tv2 = fd.ops.broadcast(tv1, is_broadcast_dim=[True, False])\n"
    "    tv3 = fd.ops.expand(tv2, shape=[{n}, {n}])\n"
    "    tv4 = fd.ops.broadcast(tv1, is_broadcast_dim=[False, True])\n"
    "    tv5 = fd.ops.expand(tv4, shape=[{n}, {n}])\n"
    "    tv6 = fd.ops.le(tv3, tv5)\n"
    "    tv7 = fd.ops.broadcast(tv6, is_broadcast_dim=[True, True, False, False])\n"
    "    tv8 = fd.ops.expand(tv7, shape=[2, 1, {n}, {n}])\n"
    "    tv9 = fd.ops.broadcast(tv0, is_broadcast_dim=[False, True, True, False])\n"
    "    tv10 = fd.ops.expand(tv9, shape=[2, 1, {n}, {n}])\n"
    "    tv11 = fd.ops.bitwise_and(tv8, tv10)\n"
    "    tv12 = fd.ops.cast(tv0, dtype=DataType.Float)\n"
    "    fd.add_output({mask})\n"
    "    fd.add_output(tv12)\n"
)


def read(body: str) -> eqsat.Fusion:
    text = HEADER + "def nvfuser_fusion(fd : FusionDefinition) -> None :\n" + body
    return eqsat.from_source(text, "<region>", inputs=False).fusion


def region(n=6, padding=False) -> eqsat.Fusion:
    return read(MASK_REGION.format(n=n, mask="tv11" if padding else "tv8"))


def causal(n):
    return torch.ones(n, n, dtype=torch.bool).tril()


# ---------------------------------------------------------------------------------------------
# which outputs are the same at every call


def test_a_mask_made_from_iota_alone_is_call_invariant_and_one_from_an_input_is_not():
    assert call_invariant_outputs(region()) == (0,)
    assert call_invariant_outputs(region(padding=True)) == ()


def test_random_draws_and_opaque_ops_vary_between_calls():
    body = (
        "    tv0 = fd.ops.uniform(0, 1, [4], rng_seed=5, rng_offset=0, dtype=DataType.Float)\n"
        "    tv1 = fd.ops.iota(length=4, start=0, step=1)\n"
        "    tv2 = fd.ops.add(tv0, tv1)\n"
        "    fd.add_output(tv2)\n"
        "    fd.add_output(tv1)\n"
    )
    f = read(body)
    assert call_invariant_outputs(f) == (1,)
    nodes = tuple(dataclasses.replace(n, opaque=True) if n.op == "iota" else n for n in f.nodes)
    assert call_invariant_outputs(eqsat.Fusion(nodes, f.outputs)) == ()


# ---------------------------------------------------------------------------------------------
# the check and the mark


def test_the_region_mask_is_the_causal_pattern_and_a_padded_one_is_not():
    x = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    mask, _ = eqsat.run_fusion(region(), [x])
    assert mask.shape == (2, 1, 6, 6)
    assert torch.equal(mask, causal(6).expand(2, 1, 6, 6))  # by hand
    assert is_causal_pattern(mask)
    padded, _ = eqsat.run_fusion(region(padding=True), [x])
    assert not is_causal_pattern(padded)


@pytest.mark.parametrize(
    "mask",
    [
        torch.ones(4, 4, dtype=torch.bool).triu(),  # the upper triangle
        torch.ones(4, 4, dtype=torch.bool).tril(-1),  # no diagonal
        torch.ones(4, 4, dtype=torch.bool),  # no mask at all
        torch.ones(4, 5, dtype=torch.bool).tril(),  # not square
        torch.ones(4, 4).tril(),  # floating
        torch.ones(1, 1, 4, dtype=torch.bool),  # broadcast along the rows
        torch.ones(0, 0, dtype=torch.bool),
        torch.ones(4, dtype=torch.bool),
        torch.stack([causal(4), causal(4).logical_not()]),  # causal at one leading index only
    ],
)
def test_anything_else_is_not_the_causal_pattern(mask):
    assert not is_causal_pattern(mask)


def test_a_mark_holds_until_the_mask_is_written_and_for_its_top_left_corner():
    mask = causal(8).expand(2, 1, 8, 8).contiguous()
    assert not is_marked(mask)
    mark(mask)
    assert is_marked(mask)
    assert is_marked(mask[:, :, :8, :8]) and is_marked(mask[:1, :, :5, :5])
    assert is_marked(mask.detach())  # an alias sharing the version counter
    assert not is_marked(mask[:, :, 1:, 1:])  # another corner: not offset 0
    assert not is_marked(mask[:, :, :5, :4])  # not square
    assert not is_marked(mask.transpose(-1, -2))  # the upper triangle
    assert not is_marked(mask.clone()) and not is_marked(None) and not is_marked(mask.float())
    alias = mask.detach()
    alias[0, 0, 0, 7] = True  # written through the alias: the mark no longer holds for either
    assert not is_marked(mask) and not is_marked(alias) and not is_marked(mask[:, :, :4, :4])


def test_a_mark_goes_with_its_storage():
    for _ in range(50):
        mask = causal(4).contiguous()
        mark(mask)
        assert is_marked(mask)
    del mask
    mark(causal(4).contiguous())
    assert live_marks() <= 2  # the freed masks' marks are dropped


class SavesDetached(torch.autograd.Function):
    """Saves the mask for the backward as Thunder's ThunderFunction does: a detach()-ed alias
    (thunder/executors/torch_autograd.py); the backward records whether it is still marked."""

    seen: list = []

    @staticmethod
    def forward(ctx, x, mask):
        ctx.save_for_backward(mask.detach())
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (saved,) = ctx.saved_tensors
        SavesDetached.seen.append(is_marked(saved))
        return grad * 2, None


def test_the_backward_finds_the_mark_of_the_mask_the_forward_saved():
    x = torch.randn(3, requires_grad=True)
    mask = causal(6).expand(2, 1, 6, 6)
    mark(mask)
    SavesDetached.seen = []
    SavesDetached.apply(x, mask).sum().backward()
    assert SavesDetached.seen == [True]
    unmarked = causal(6).expand(2, 1, 6, 6)
    SavesDetached.apply(x, unmarked).sum().backward()
    assert SavesDetached.seen == [True, False]


# ---------------------------------------------------------------------------------------------
# attention: a marked mask runs as is_causal


def qk(seq_q=8, seq_k=8):
    return torch.randn(2, 3, seq_q, 16), torch.randn(2, 3, seq_k, 16)


def test_a_marked_mask_over_square_scores_runs_causal_without_the_mask():
    q, k = qk()
    mask = causal(8).expand(2, 1, 8, 8)
    assert mask_arguments(mask, False, q, k) == (mask, False)  # not marked
    mark(mask)
    assert mask_arguments(mask, False, q, k) == (None, True)
    assert mask_arguments(mask, True, q, k) == (mask, True)  # as given
    q6, k6 = qk(6, 8)
    small = causal(6)
    mark(small)
    assert mask_arguments(small, False, q6, k6)[0] is small  # the scores are 6 x 8, not square
    one = torch.ones(1, 1, dtype=torch.bool)
    mark(one)
    assert mask_arguments(one, False, q, k)[0] is one  # broadcast to 8 x 8: no causal mask


def test_attention_causal_equals_attention_with_the_regions_mask():
    """What the executor's change means, on torch's math backend: the same attention."""
    x = torch.ones(2, 6, dtype=torch.bool)
    mask, _ = eqsat.run_fusion(region(), [x])
    q, k, v = (torch.randn(2, 3, 6, 16, dtype=torch.float64) for _ in range(3))
    scores = q @ k.transpose(-1, -2) / math.sqrt(16)
    want = torch.softmax(scores.masked_fill(~causal(6), -math.inf), dim=-1) @ v  # by hand
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), want)
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, is_causal=True), want)


# ---------------------------------------------------------------------------------------------
# the region hook marks the region's causal masks at every call, and only those


def hook(fusion):
    region = FakeThunderRegion(
        fusion,
        lambda *args: eqsat.run_fusion(fusion, list(args)),
        name="nvFusion0: (iota, broadcast_in_dim, le, expand)",
    )
    return RegionHook(region, name="nvFusion0", trace="forward", options=Options(), report=ThunderReport())


def test_the_hook_marks_a_call_invariant_causal_mask_at_every_call():
    h = hook(region())
    for _ in range(3):
        mask, floats = h(torch.ones(2, 6, dtype=torch.bool))
        assert is_marked(mask) and not is_marked(floats)
    assert h.thunder.calls == 3
    (record,) = h.report.regions
    assert record.causal_masks == (0,) and "causal masks: outputs 0" in str(record)


def test_the_hook_never_marks_a_mask_made_from_an_input_even_when_it_is_causal():
    """The padding mask is causal at the first call (no padding) and not at the second: only a
    call-invariant output is trusted after one check."""
    h = hook(region(padding=True))
    mask, _ = h(torch.ones(2, 6, dtype=torch.bool))
    assert is_causal_pattern(mask) and not is_marked(mask)
    padded = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])
    mask, _ = h(padded)
    assert not is_causal_pattern(mask) and not is_marked(mask)
