"""Which form of the fused qkv gradient does nvFuser run fastest? (eqsat.testing.qkv_gradient)

Thunder's Phi-3 backward regions assemble the fused qkv projection's gradient from the
per-head gradients: the rotary backward, a permute to [B, S, H, D], and pads and adds. In the
H200 corpus run they ran in the resize scheduler at 2.5 to 6x their bytes floor
(``docs/step-profile.md``). This bench times, side by side on one GPU, each form of
``eqsat.testing.qkv_gradient`` (as Thunder writes it, ``cat``, the permutes in kernels of their
own, the heads joined first), eqsat's optimization of Thunder's form, and the cost model's
prediction of each. It does so at Phi-3's shapes, with the inputs contiguous and with the key's
stored [B, S, H, D] as in ``phi3_18``. Each output is checked against torch code written by
hand. What the GPU shows is what a rule and the cost model are to follow.

    python bench/qkv_gradient.py [--runs 50] [--json out.json]
"""

from __future__ import annotations

import sys

from gpu_timing import direct_definition, eqsat_run, finish, predicted_run, side_by_side_args

from eqsat.testing.qkv_gradient import FORMS, definition, make_inputs, torch_reference

SHAPES = ((4, 16, 1024, 128), (4, 16, 2048, 128), (4, 32, 2048, 96))
LAYOUTS = (("bhsd",) * 3, ("bhsd", "bshd", "bhsd"))


def main(argv=None) -> int:
    args = side_by_side_args(__doc__, "qkv_gradient.py", 50, argv)
    if args is None:
        return 2
    rows = []
    for shape in SHAPES:
        for layouts in LAYOUTS:
            inputs = make_inputs(shape, layouts=layouts, device="cuda")
            want = torch_reference(*inputs)
            print(f"\n{list(shape)}, layouts {layouts}")
            where = {"shape": list(shape), "layouts": list(layouts)}
            for form in FORMS:
                fd = direct_definition(lambda DT, form=form: definition(shape, form, True, layouts, DT))
                fusion = definition(shape, form, True, layouts)
                rows.append({**where, **predicted_run(form, fd, fusion, inputs, want, args.runs)})
            rows.append(
                {**where, **eqsat_run(definition(shape, "thunder", True, layouts), inputs, want, args.runs)}
            )
    return finish(args, rows)


if __name__ == "__main__":
    sys.exit(main())
