"""What nvFuser itself does at the edges eqsat's torch executor must match (GPU).

Writes JSON: the op names each frontend's ``fd.ops`` has, and nvFuser's results for integer
division and remainder at INT_MIN / -1 and by zero, shifts by the type's width or more, casts
to FP8 that overflow, and the dtype of abs of a complex tensor.

    python bench/semantics_probe.py --json out.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import traceback

import torch


def _ops_of(module) -> list[str]:
    fd = module.FusionDefinition()
    ops = getattr(fd, "ops", None)
    if ops is None:  # classic: ops exist once the definition is entered
        with fd:
            ops = fd.ops
            return sorted(n for n in dir(ops) if not n.startswith("_"))
    return sorted(n for n in dir(ops) if not n.startswith("_"))


def _run(module, define, inputs):
    """Outputs of a one-off definition on ``module``, or the error text."""
    try:
        with module.FusionDefinition() as fd:
            define(fd, module.DataType)
        outs = fd.execute(inputs)
        return [{"dtype": str(o.dtype), "values": o.cpu().tolist()} for o in outs]
    except Exception as err:  # noqa: BLE001 -- the probe records whatever nvFuser says
        return {"error": f"{type(err).__name__}: {err}"[:400]}


def _binary(op: str, dtype_name: str, torch_dtype):
    def define(fd, DT):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=getattr(DT, dtype_name))
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=getattr(DT, dtype_name))
        fd.add_output(getattr(fd.ops, op)(a, b))

    info = torch.iinfo(torch_dtype)
    a = torch.tensor([info.min, info.min, 7, -7, 7, -7, 0, info.max], dtype=torch_dtype, device="cuda")
    b = torch.tensor([-1, 1, 0, 0, -2, 2, 0, -1], dtype=torch_dtype, device="cuda")
    return define, [a, b]


def _scalar_div(op: str, dtype_name: str, a_val: int, b_val: int):
    def define(fd, DT):
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=getattr(DT, dtype_name))
        a = fd.define_scalar(a_val, dtype=DT.Int)
        b = fd.define_scalar(b_val, dtype=DT.Int)
        s = getattr(fd.ops, op)(a, b)
        fd.add_output(fd.ops.add(x, fd.ops.cast(s, getattr(DT, dtype_name))))

    return define


def _shift(op: str, dtype_name: str, torch_dtype):
    def define(fd, DT):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=getattr(DT, dtype_name))
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=getattr(DT, dtype_name))
        fd.add_output(getattr(fd.ops, op)(a, b))

    bits = torch.iinfo(torch_dtype).bits
    a = torch.tensor([1, -1, 5, -5, 1, -8], dtype=torch_dtype, device="cuda")
    b = torch.tensor([bits, bits, bits + 1, 2 * bits, -1, 1], dtype=torch_dtype, device="cuda")
    return define, [a, b]


def _fp8_cast(target: str):
    def define(fd, DT):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DT.Float)
        fd.add_output(fd.ops.cast(fd.ops.cast(a, getattr(DT, target)), DT.Float))

    x = torch.tensor(
        [1e6, -1e6, 60000.0, 57344.0, 449.0, 464.0, 500.0, float("inf"), float("nan")], device="cuda"
    )
    return define, [x]


def _complex_abs():
    def define(fd, DT):
        a = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DT.ComplexFloat)
        fd.add_output(fd.ops.abs(a))

    return define, [torch.tensor([3 + 4j, -1j], dtype=torch.complex64, device="cuda")]


def probe(module) -> dict:
    out: dict = {"ops": _ops_of(module), "cases": {}}
    cases = out["cases"]
    for dname, tdt in (("Int32", torch.int32), ("Int", torch.int64)):
        for op in ("div", "fmod", "remainder", "truediv"):
            if hasattr(torch, "int32"):
                define, ins = _binary(op, dname, tdt)
                cases[f"{op}_{dname}"] = _run(module, define, ins)
        for op in ("bitwise_left_shift", "bitwise_right_shift", "logical_right_shift"):
            define, ins = _shift(op, dname, tdt)
            cases[f"{op}_{dname}"] = _run(module, define, ins)
    x = torch.zeros(2, dtype=torch.int64, device="cuda")
    for op in ("div", "fmod", "remainder"):
        cases[f"scalar_{op}_7_0"] = _run(module, _scalar_div(op, "Int", 7, 0), [x])
    for target in ("Float8_e5m2", "Float8_e4m3fn"):
        define, ins = _fp8_cast(target)
        cases[f"cast_{target}"] = _run(module, define, ins)
    define, ins = _complex_abs()
    cases["abs_complex"] = _run(module, define, ins)
    return out


def scalar_edge(module) -> dict:
    """INT64_MIN / -1 as scalar arithmetic: nvFuser's host may evaluate it in C++ and trap, so
    it runs in a process of its own (``--scalar-edge``)."""
    x = torch.zeros(2, dtype=torch.int64, device="cuda")
    return {
        f"scalar_{op}_intmin_m1": _run(module, _scalar_div(op, "Int", -(2**63), -1), [x])
        for op in ("div", "fmod", "remainder")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", required=True)
    parser.add_argument(
        "--scalar-edge",
        action="store_true",
        help="only INT64_MIN / -1 as scalar arithmetic (may kill the process)",
    )
    args = parser.parse_args()
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name()}
    if args.scalar_edge:
        import nvfuser_direct

        result["nvfuser_direct"] = scalar_edge(nvfuser_direct)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps(result, indent=1))
        return
    for name in ("nvfuser", "nvfuser_direct"):
        try:
            module = importlib.import_module(name)
        except Exception as err:  # noqa: BLE001
            result[name] = {"import_error": f"{type(err).__name__}: {err}"}
            continue
        result[name] = {"version": str(getattr(module, "__version__", "?"))}
        try:
            result[name].update(probe(module))
        except Exception:  # noqa: BLE001
            result[name]["probe_error"] = traceback.format_exc()[-2000:]
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print(
        json.dumps(
            {
                k: (
                    v
                    if k != "nvfuser" and k != "nvfuser_direct"
                    else {kk: vv for kk, vv in v.items() if kk != "ops"}
                )
                for k, v in result.items()
            },
            indent=1,
        )[:11000]
    )


if __name__ == "__main__":
    main()
