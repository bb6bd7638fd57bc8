"""GPUs and their types in every form Slurm prints them: TRES (`gres/gpu=N`, `gres/gpu:TYPE=N`, in AllocTRES,
ReqTRES, CfgTRES) and GRES strings (`gpu:N`, `gpu:TYPE:N`, with or without `(IDX:0-1)` or `(S:0-1)`, among other
GRES such as `hbm:0` or `bandwidth:4G`, in AllocGRES, ReqGRES and a node's Gres).

One grammar for all of them, read the same way by the Polars expressions of the job readers and by the Python
function of the capacity reader: the parenthesised parts are removed, each comma-separated entry is wrapped in commas
of its own, and an entry is a GPU entry when it matches UNTYPED or TYPED. The GPUs of a text are its untyped entry's
count (the total Slurm prints beside the typed entries, `gres/gpu=2,gres/gpu:a100=2`), else the sum of its typed
ones; a text without a GPU entry names none (null), which is not 0 GPUs (`gres/gpu=0`).
"""

from __future__ import annotations

import re

import polars as pl

# `,gres/gpu=2,` or `,gpu:2,` (also `gres:gpu:2` and `gres/gpu:2`, as squeue prints them); the count is group 1.
UNTYPED = r",(?:gres[/:])?gpu[=:](\d+),"
# `,gres/gpu:a100=2,` or `,gpu:tesla:2,`: the type is group 1, the count group 2.
TYPED = r",(?:gres[/:])?gpu:([^=:,]+)[=:](\d+),"
PARENTHESISED = r"\([^)]*\)"  # `(IDX:0-1)`, `(S:0-1)`: where the GPUs are, not how many
TYPE_SEPARATOR = ","  # between the distinct types of a job with GPUs of several types: `a100,v100`


def _wrapped(col: str) -> pl.Expr:
    """The text without its parenthesised parts, every entry between two commas of its own: `,a,,b,`."""
    bare = pl.col(col).str.replace_all(PARENTHESISED, "").str.replace_all(",", ",,", literal=True)
    return pl.concat_str([pl.lit(","), bare, pl.lit(",")])


def _typed(col: str) -> pl.Expr:
    return _wrapped(col).str.extract_all(TYPED)


def gpu_count(col: str) -> pl.Expr:
    """GPUs named in a TRES or GRES text column: its untyped entry's count, else the sum of its typed ones; null
    when the text names no GPU (or is null)."""
    untyped = _wrapped(col).str.extract(UNTYPED, 1).cast(pl.Int64)
    typed = _typed(col)
    typed_sum = typed.list.eval(pl.element().str.extract(TYPED, 2).cast(pl.Int64)).list.sum()
    return pl.coalesce(untyped, pl.when(typed.list.len() > 0).then(typed_sum))


def gpu_types(col: str) -> pl.Expr:
    """The distinct GPU types named in a TRES or GRES text column, in order, joined by TYPE_SEPARATOR (null when
    it names none)."""
    names = _typed(col).list.eval(pl.element().str.extract(TYPED, 1).unique(maintain_order=True))
    return pl.when(names.list.len() > 0).then(names.list.join(TYPE_SEPARATOR))


def count_gpus(text: str | None) -> int | None:
    """GPUs named in one TRES or GRES text, read as gpu_count reads a column (None when it names no GPU)."""
    wrapped = "," + re.sub(PARENTHESISED, "", text or "").replace(",", ",,") + ","
    untyped = re.search(UNTYPED, wrapped)
    if untyped:
        return int(untyped.group(1))
    typed = re.findall(TYPED, wrapped)
    return sum(int(n) for _, n in typed) if typed else None
