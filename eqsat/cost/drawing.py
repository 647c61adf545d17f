"""A picture of the kernels the cost model predicts for a fusion as given and as eqsat optimized
it, side by side (``eqsat optimize FILE --draw OUT.svg``).

Each kernel is a box: its number (dearest first, as ``OptimizedFusion.explain`` numbers them),
kind, predicted time, the bytes it reads and writes in global memory, its arithmetic and its
ops. Each tensor in global memory is an arrow, as wide as its bytes (on one scale for both
sides): from the fusion's inputs to the kernels that read them, from kernel to kernel (red: a
value one kernel writes and another reads back, the traffic a rewrite can remove), and to the
fusion's outputs, labelled with the definition's name for it (``T27``, as eqsat prints
definitions), its dtype and shape, and its bytes. Ops nvFuser runs outside the priced kernels
(matmul, ``segment_set``...) are dashed boxes. Each side's caption gives its totals (kernels,
bytes moved, predicted time, of it the host's); the optimized side's names the rules that
changed the fusion, or why eqsat kept it as given.

:func:`kernel_graph_dot` gives the picture as Graphviz DOT text; :func:`draw_kernels` writes
it as ``.dot``/``.gv`` (that text: nothing needed), or ``.svg``, ``.png`` or ``.pdf``, drawn by
Graphviz's ``dot`` program (``apt-get install graphviz``; the ``graphviz`` Python package, which
egglog needs, only calls it). All times are the cost model's predictions, not measurements.
"""

from __future__ import annotations

import html
import math
import shutil
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import graphviz

from eqsat.errors import FusionError

from .estimate import Estimate, Kernel, Tensor
from .ops import Kept

if TYPE_CHECKING:  # annotations only
    from eqsat.pipeline.driver import OptimizedFusion
    from eqsat.pipeline.report import Report

TEXT_SUFFIXES = (".dot", ".gv")  # DOT text: written without Graphviz
DRAWN_SUFFIXES = (".svg", ".png", ".pdf")  # drawn by Graphviz's dot program
INSTALL_DOT = (
    "install Graphviz (apt-get install graphviz, brew install graphviz or conda install "
    "graphviz) so that `dot` is on PATH"
)

SHORT_DTYPES = {
    "Double": "f64",
    "Float": "f32",
    "Half": "f16",
    "BFloat16": "bf16",
    "Float8_e4m3fn": "f8e4m3",
    "Float8_e5m2": "f8e5m2",
    "Float8_e8m0fnu": "f8e8m0",
    "Int": "i64",
    "Int32": "i32",
    "UInt64": "u64",
    "Index": "index",
    "Bool": "bool",
    "ComplexFloat": "c64",
    "ComplexDouble": "c128",
}
HANDOFF = "#c0392b"  # a tensor one kernel writes and another reads back
IO = "#4b5563"  # a tensor read from the inputs or written to the outputs
FONT = "Helvetica"
EDGE_GAP = 8  # points between an arrow and its label


def check_drawable(path) -> Path:
    """``path`` as a Path, where :func:`draw_kernels` can write it: FusionError where its
    suffix is none of ``.dot``, ``.gv``, ``.svg``, ``.png``, ``.pdf``, or is one that Graphviz
    draws and its ``dot`` program is not on PATH (the message says what to install)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TEXT_SUFFIXES + DRAWN_SUFFIXES:
        raise FusionError(
            f"cannot draw {str(path)!r}: the picture's file name must end in one of "
            f"{', '.join(TEXT_SUFFIXES + DRAWN_SUFFIXES)} (got {suffix or 'no suffix'!r})"
        )
    if suffix in DRAWN_SUFFIXES and shutil.which("dot") is None:
        raise FusionError(
            f"drawing {str(path)!r} needs Graphviz's `dot` program, which is not on PATH: "
            f"{INSTALL_DOT}; or write a .dot file, which needs nothing"
        )
    return path


def draw_kernels(opt: OptimizedFusion | Report, path, title: str | None = None) -> Path:
    """Write the picture of ``opt``'s predicted kernels before and after (an
    :class:`~eqsat.optimize.OptimizedFusion` or its ``report``) to ``path``: DOT text for
    ``.dot``/``.gv``, else drawn by Graphviz's ``dot`` as the suffix says (``.svg``, ``.png``,
    ``.pdf``). ``title`` heads it (a file name, say). Returns the path written; FusionError as
    :func:`check_drawable` says, or where ``dot`` fails."""
    path = check_drawable(path)
    text = kernel_graph_dot(opt, title)
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        path.write_text(text)
        return path
    try:
        data = graphviz.Source(text).pipe(format=suffix[1:])
    except graphviz.ExecutableNotFound:
        raise FusionError(
            f"drawing {str(path)!r} needs Graphviz's `dot` program, which did not run: "
            f"{INSTALL_DOT}; or write a .dot file, which needs nothing"
        ) from None
    except graphviz.CalledProcessError as err:
        stderr = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else str(err.stderr)
        raise FusionError(f"Graphviz's `dot` failed to draw {str(path)!r}: {stderr.strip()}") from None
    path.write_bytes(data)
    return path


def kernel_graph_dot(opt: OptimizedFusion | Report, title: str | None = None) -> str:
    """The picture of ``opt``'s predicted kernels (an OptimizedFusion or its ``report``) as
    Graphviz DOT text: the fusion as given on the left, as eqsat optimized it on the right,
    as the module's docstring describes; ``title`` heads it."""
    report = getattr(opt, "report", opt)
    before, after = report.before, report.after
    widest = max((b for est in (before, after) for b in _flows(est)), default=1)
    g = graphviz.Digraph(
        "kernels",
        graph_attr={
            "rankdir": "TB",
            "labelloc": "t",
            "fontname": FONT,
            "fontsize": "18",
            "nodesep": "0.35",
            "ranksep": "0.55",
            "newrank": "true",
            "label": _headline(report, title),
        },
        node_attr={"fontname": FONT, "fontsize": "12"},
        edge_attr={"fontname": FONT, "fontsize": "11"},
    )
    _side(g, "before", before, _caption("As given", before, report, None), widest)
    _side(
        g,
        "after",
        after,
        _caption("Optimized by eqsat" if report.changed else "eqsat kept it as given", after, report, before),
        widest,
    )
    return g.source


def _headline(report: Report, title: str | None) -> str:
    b, a = report.before, report.after
    lines = [f"<B>{_esc(title)}</B>"] if title else []
    if not report.estimated:
        lines.append("the cost model gave no estimate of this fusion")
    elif report.changed and a.time_us > 0:
        moved = b.bytes - a.bytes
        moved = (
            f"{_bytes(abs(moved))} {'less' if moved > 0 else 'more'} moved"
            if moved
            else "the same bytes moved"
        )
        lines.append(
            f"predicted {b.time_us:.1f} µs as given, {a.time_us:.1f} µs optimized: "
            f"<B>{b.time_us / a.time_us:.2f}× faster</B>"
        )
        work = f", {_flops(b.flops)} → {_flops(a.flops)}" if _flops(b.flops) != _flops(a.flops) else ""
        lines.append(
            f'<FONT POINT-SIZE="14">{moved} through global memory{work}, '
            f"{len(b.kernels)} → {_plural(len(a.kernels), 'kernel')}</FONT>"
        )
    else:
        lines.append(f"predicted {b.time_us:.1f} µs; eqsat kept the fusion as given")
    lines.append(
        '<FONT POINT-SIZE="11" COLOR="#4b5563">boxes: kernels (kind, predicted time, bytes, '
        "ops); arrows: tensors in global memory, as wide as their bytes; "
        f'<FONT COLOR="{HANDOFF}">red</FONT>: written by one kernel and read back by another; '
        "times are eqsat's cost-model predictions</FONT>"
    )
    return "<" + "<BR/>".join(lines) + ">"


def _caption(heading: str, est: Estimate, report: Report, before: Estimate | None) -> str:
    """A side's caption: its heading and totals; on the optimized side (``before`` given) the
    rules that changed it, or why it was kept as given."""
    lines = [f'<FONT POINT-SIZE="16"><B>{_esc(heading)}</B></FONT>']
    if report.estimated:
        lines.append(
            f"{_plural(len(est.kernels), 'kernel')} · {_bytes(est.bytes)} moved · "
            f"<B>{est.time_us:.1f} µs predicted</B>"
        )
        lines.append(f"({est.device_us:.1f} µs in kernels + {est.host_us:.1f} µs host per execute)")
    else:
        lines.append("not estimated")
    if before is not None:
        if report.changed:
            rules = ", ".join(report.rules) or "none credited"
            lines += _wrapped(f"rules that changed it: {rules}", 70, bold_prefix="rules that changed it:")
        else:
            why = (
                str(report.rejected[0])
                if report.rejected
                else next((n for n in report.notes), "no candidate was predicted cheaper")
            )
            lines += _wrapped(f"why: {why}", 70)
    return "<" + "<BR/>".join(lines) + ">"


def _wrapped(text: str, width: int, bold_prefix: str | None = None) -> list[str]:
    out = [_esc(line) for line in textwrap.wrap(text, width, break_on_hyphens=False)]
    if bold_prefix and out and out[0].startswith(_esc(bold_prefix)):
        out[0] = f"<B>{_esc(bold_prefix)}</B>{out[0][len(_esc(bold_prefix)) :]}"
    return out


def _flows(est: Estimate):
    for k in est.kernels:
        yield from k.reads.values()
        yield from k.writes.values()


def _side(g: graphviz.Digraph, side: str, est: Estimate, caption: str, widest: int) -> None:
    """One side's cluster: its inputs, kernels, ops outside kernels and outputs, and the arrows."""
    p = side[0]
    with g.subgraph(name=f"cluster_{side}") as c:
        c.attr(
            label=caption,
            labelloc="t",
            fontname=FONT,
            fontsize="13",
            style="rounded",
            color="#9ca3af",
            margin="16",
        )
        if not est.kernels:
            c.node(f"{p}_none", "no kernels", shape="plaintext")
            return
        writer = {n: i for i, k in enumerate(est.kernels) for n in k.writes}
        for i, k in enumerate(est.kernels):
            c.node(
                f"{p}_k{i}",
                _kernel_label(i, k),
                shape="box",
                style="rounded,filled",
                fillcolor=k.kind.color,
                color="#374151",
                margin="0.12,0.06",
            )
        sources = _sources(c, p, est, writer)

        def origin(n: int) -> tuple[str, bool]:
            """The node a tensor comes from, and whether a kernel wrote it."""
            return (f"{p}_k{writer[n]}", True) if n in writer else (sources[n], False)

        _arrows(c, p, est, sources, origin, widest)
        _outputs(c, p, est, origin, widest)


def _sources(c: graphviz.Digraph, p: str, est: Estimate, writer: dict[int, int]) -> dict[int, str]:
    """The boxes of the tensors no kernel writes (the inputs, in a row; the outputs of ops run
    outside the kernels; values no kernel computes): tensor -> the box it comes from."""
    tensors = est.tensors
    sources: dict[int, str] = {}
    inputs = [
        n
        for n, t in sorted(tensors.items(), key=lambda nt: _order(nt[1]))
        if n not in writer and t.source == "input"
    ]
    with c.subgraph(name=f"{p}_inputs") as row:
        row.attr(rank="same")
        for n in inputs:
            sources[n] = f"{p}_in{n}"
            row.node(
                sources[n],
                _tensor_label(tensors[n], "input"),
                shape="box",
                style="rounded,filled",
                fillcolor="#f3f4f6",
                color="#6b7280",
            )
        _in_order(row, [sources[n] for n in inputs])
    for n, (op, ins) in sorted(est.barriers.items()):
        if n not in tensors:
            continue
        sources[n] = f"{p}_op{n}"
        c.node(
            sources[n],
            f'<<B>{_esc(op)}</B><BR/><FONT POINT-SIZE="10">run by nvFuser outside the priced kernels</FONT>>',
            shape="box",
            style="dashed,rounded",
            color="#6b7280",
        )
    for n, t in tensors.items():  # a value no kernel computes: a view of others, say
        if n not in writer and n not in sources:
            sources[n] = f"{p}_src{n}"
            c.node(
                sources[n],
                _tensor_label(t, f"{t.source or '?'}, in no kernel"),
                shape="box",
                style="dashed,rounded",
            )
    return sources


def _arrows(c: graphviz.Digraph, p: str, est: Estimate, sources: dict[int, str], origin, widest: int) -> None:
    """The arrows into the kernels, into the ops outside them and into the values no kernel
    computes (``origin``: a tensor -> its box, and whether a kernel wrote it)."""
    tensors = est.tensors
    for i, k in enumerate(est.kernels):
        for n, nbytes in sorted(k.reads.items()):
            tail, handoff = origin(n)
            t = tensors[n]
            label = _edge_label(t, nbytes, named=handoff or n in est.barriers)
            c.edge(
                tail,
                f"{p}_k{i}",
                label=label,
                penwidth=_width(nbytes, widest),
                color=HANDOFF if handoff else IO,
                fontcolor=HANDOFF if handoff else "#111827",
            )
    for n, (op, ins) in sorted(est.barriers.items()):
        for m in ins:
            if m in tensors and n in sources:
                tail, handoff = origin(m)
                t = tensors[m]
                c.edge(
                    tail,
                    sources[n],
                    label=_edge_label(t, t.bytes, named=handoff),
                    penwidth=_width(t.bytes, widest),
                    color=IO,
                    style="dashed",
                )
    for n, t in tensors.items():
        for m in t.of:
            if n in sources and m in tensors:
                tail, handoff = origin(m)
                c.edge(
                    tail,
                    sources[n],
                    label=_edge_label(tensors[m], tensors[m].bytes, named=handoff),
                    penwidth=_width(tensors[m].bytes, widest),
                    color=HANDOFF if handoff else IO,
                    fontcolor=HANDOFF if handoff else "#111827",
                    style="dashed",
                )


def _outputs(c: graphviz.Digraph, p: str, est: Estimate, origin, widest: int) -> None:
    """The fusion's outputs, in a row, each with its arrow from the box it comes from."""
    tensors = est.tensors
    outputs = [n for n, t in sorted(tensors.items(), key=lambda nt: _order(nt[1])) if t.output]
    with c.subgraph(name=f"{p}_outputs") as row:
        row.attr(rank="same")
        for n in outputs:
            t = tensors[n]
            row.node(
                f"{p}_out{n}",
                _tensor_label(t, "output"),
                shape="box",
                style="rounded,filled",
                fillcolor="#fef9c3",
                color="#a16207",
            )
            c.edge(
                origin(n)[0],
                f"{p}_out{n}",
                label=_beside(_bytes(t.bytes)),
                penwidth=_width(t.bytes, widest),
                color=IO,
            )
        _in_order(row, [f"{p}_out{n}" for n in outputs])


def _in_order(row: graphviz.Digraph, names: list[str]) -> None:
    """Keep a row's boxes left to right in ``names``' order (invisible arrows between them)."""
    for a, b in zip(names, names[1:]):
        row.edge(a, b, style="invis")


def _order(t: Tensor) -> tuple:
    """Inputs and outputs in the definition's order (``T0`` before ``T12``)."""
    name = t.name or ""
    return (0, int(name[1:])) if name[1:].isdigit() else (1, name)


def _kernel_label(i: int, k: Kernel) -> str:
    ops = _counted(op.op if isinstance(op, Kept) else op for op in k.ops)  # a kept op by its name
    op_lines = textwrap.wrap(", ".join(ops), 46, break_on_hyphens=False) or ["(no ops)"]
    again = f" · recomputes {k.recomputed} values" if k.recomputed else ""
    again += f" · draws {_count(k.drawn)} random numbers" if k.drawn else ""
    moved = f"reads {_bytes(k.bytes_read)} · writes {_bytes(k.bytes_written)}"
    work = _flops(k.flops)
    moved, work = (f"<B>{moved}</B>", work) if k.bound == "memory" else (moved, f"<B>{work}</B>")
    rows = [
        f'<TR><TD ALIGN="LEFT"><B>kernel {i}</B> · {_esc(k.kind)} · {k.bound}-bound</TD>'
        '<TD WIDTH="12"></TD>'
        f'<TD ALIGN="RIGHT"><FONT POINT-SIZE="14"><B>{k.time_us:.1f} µs</B></FONT></TD></TR>',
        f'<TR><TD COLSPAN="3" ALIGN="LEFT">{moved} · {work}{_esc(again)}</TD></TR>',
        '<TR><TD COLSPAN="3" ALIGN="LEFT"><FONT POINT-SIZE="10" COLOR="#374151">'
        + "".join(f'{_esc(line)}<BR ALIGN="LEFT"/>' for line in op_lines)
        + "</FONT></TD></TR>",
    ]
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="2">' + "".join(rows) + "</TABLE>>"


def _tensor_text(t: Tensor) -> str:
    dims = "?" if t.shape is None else ", ".join(map(str, t.shape))
    return f"{SHORT_DTYPES.get(t.dtype, t.dtype)}[{dims}]"


def _tensor_label(t: Tensor, role: str) -> str:
    name = f"<B>{_esc(t.name)}</B> " if t.name else ""
    return f"<{name}{_esc(_tensor_text(t))}<BR/>{_esc(role)} · {_bytes(t.bytes)}>"


def _edge_label(t: Tensor, nbytes: int, named: bool) -> str:
    """The arrow of ``t`` carrying ``nbytes``: its name, dtype and shape where no input or
    output box says them (``named``), and its bytes (those gathered, where fewer)."""
    text = ""
    if named:
        text = (f"{_esc(t.name)} " if t.name else "") + f"{_esc(_tensor_text(t))}<BR/>"
    gathered = f" of {_bytes(t.bytes)} (gathered)" if nbytes < t.bytes else ""
    return _beside(f"{text}<B>{_bytes(nbytes)}</B>{gathered}")


def _beside(text: str) -> str:
    """An arrow's label, kept ``EDGE_GAP`` points clear of the arrow on its left."""
    return (
        f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0"><TR><TD WIDTH="{EDGE_GAP}">'
        f"</TD><TD>{text}</TD></TR></TABLE>>"
    )


def _width(nbytes: int, widest: int) -> str:
    return f"{1.0 + 7.0 * math.sqrt(max(nbytes, 0) / max(widest, 1)):.2f}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _counted(ops) -> list[str]:
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return [f"{op}×{n}" if n > 1 else op for op, n in counts.items()]


def _bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}" if abs(n) / scale < 100 else f"{n / scale:.0f} {unit}"
    return f"{n:.0f} B"


def _count(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.0f}"


def _flops(n: float) -> str:
    for unit, scale in (("GFLOP", 1e9), ("MFLOP", 1e6), ("KFLOP", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}" if n / scale < 100 else f"{n / scale:.0f} {unit}"
    return f"{n:.0f} FLOP"


def _esc(text) -> str:
    return html.escape(str(text), quote=False)
