"""eqsat.testing.qkv_gradient: every form of the fused qkv gradient, run by eqsat's executor
on the CPU, equals torch code written by hand, in both input layouts, with and without the
rotary backward; eqsat's optimization of Thunder's form keeps its values (bench/qkv_gradient.py
times the forms on a GPU)."""

import pytest
import torch

import eqsat
from eqsat.testing.qkv_gradient import FORMS, definition, make_inputs, torch_reference

SHAPE = (2, 3, 5, 8)
LAYOUTS = (("bhsd",) * 3, ("bhsd", "bshd", "bhsd"))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("layouts", LAYOUTS)
@pytest.mark.parametrize("rope", [True, False])
def test_each_form_equals_torch(form, layouts, rope):
    inputs = make_inputs(SHAPE, rope=rope, layouts=layouts)
    if layouts[1] == "bshd":
        assert inputs[1].stride() == (120, 8, 24, 1)  # stored [B, S, H, D]
    (got,) = eqsat.run_fusion(eqsat.ingest(definition(SHAPE, form, rope, layouts)), inputs, strict=True)
    (want,) = torch_reference(*inputs)
    assert got.shape == (2, 5, 72) and got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want)


def test_eqsat_keeps_the_values_of_thunders_form():
    inputs = make_inputs(SHAPE, layouts=LAYOUTS[1])
    fusion = eqsat.ingest(definition(SHAPE, "thunder", True, LAYOUTS[1]))
    optimized = eqsat.optimize_fusion(fusion, inputs)
    (got,) = eqsat.run_fusion(optimized.fusion, inputs, strict=True)
    torch.testing.assert_close(got, torch_reference(*inputs)[0])


@pytest.mark.parametrize(
    "kwargs, match",
    [({"form": "stack"}, "form"), ({"layouts": ("bhsd",)}, "layouts"), ({"shape": (2, 3, 5, 7)}, "odd")],
)
def test_bad_arguments_are_clear_errors(kwargs, match):
    args = {"shape": SHAPE, **kwargs}
    with pytest.raises(ValueError, match=match):
        definition(**args)
