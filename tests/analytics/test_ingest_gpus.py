"""The one GPU parser (analytics.ingest.gpus) on every form Slurm prints: TRES (`gres/gpu=N`, `gres/gpu:TYPE=N`)
and GRES strings (`gpu:N`, `gpu:TYPE:N`, with or without `(IDX:...)`/`(S:...)`, among other GRES), read the same by
its Polars expressions (job readers) and its Python function (capacity reader)."""

from __future__ import annotations

import polars as pl
import pytest

from analytics.ingest.gpus import count_gpus, gpu_count, gpu_types

# (text, GPUs, types): forms of sacct's AllocTRES/ReqTRES (slurm.schedmd.com/sacct.html, tres.html), of
# AllocGRES/ReqGRES of Slurm before 19.05 and of a node's Gres (gres.html), as the exports print them.
FORMS = [
    # TRES
    ("billing=4,cpu=4,gres/gpu=8,mem=4000M,node=1", 8, None),
    ("gres/gpu=16", 16, None),
    ("cpu=2,gres/gpu:a100=2,gres/gpu=2,node=1", 2, "a100"),  # typed beside the total: the total
    ("cpu=2,gres/gpu:a100=2,gres/gpu:v100=1,node=1", 3, "a100,v100"),  # typed only: their sum
    ("gres/gpu:1g.5gb=2,cpu=1", 2, "1g.5gb"),  # a MIG profile is a type
    ("cpu=1,gres/gpu=0", 0, None),  # 0 GPUs is said, not unknown
    ("cpu=2,gres/gpumem=40G,mem=1G", None, None),  # another TRES, no GPU named
    # GRES strings
    ("gpu:4", 4, None),
    ("gpu:P100:2(IDX:0-1)", 2, "P100"),
    ("gpu:2(IDX:0,2)", 2, None),
    ("hbm:0,gpu:4", 4, None),
    ("bandwidth:4G,gpu:k80:1", 1, "k80"),
    ("gpu:tesla:1(IDX:3),bandwidth:4G", 1, "tesla"),
    ("gpu:a100:4(S:0-1)", 4, "a100"),
    ("gpu:k80:2(IDX:0-1),gpu:p100:1(IDX:2)", 3, "k80,p100"),
    ("gpu:3g.20gb:1(IDX:0)", 1, "3g.20gb"),
    ("gres:gpu:2", 2, None),  # squeue's tres-per-node
    ("hbm:0", None, None),
    ("mps:100", None, None),
    ("", None, None),
    (None, None, None),
]


def _frame(text: str | None) -> pl.DataFrame:
    return pl.DataFrame({"t": [text]}, schema={"t": pl.String})


@pytest.mark.parametrize(("text", "gpus", "types"), FORMS)
def test_every_form_gives_its_gpus_and_types(text, gpus, types):
    assert _frame(text).select(gpu_count("t")).item() == gpus
    assert _frame(text).select(gpu_types("t")).item() == types


@pytest.mark.parametrize(("text", "gpus", "types"), FORMS)
def test_the_python_reader_agrees_with_the_column_reader(text, gpus, types):
    assert count_gpus(text) == gpus


def test_a_column_of_mixed_forms_is_read_row_by_row():
    texts = [t for t, _, _ in FORMS]
    texts_frame = pl.DataFrame({"t": texts}, schema={"t": pl.String})
    frame = texts_frame.select(gpu_count("t").alias("gpus"), gpu_types("t").alias("types"))
    assert frame["gpus"].to_list() == [g for _, g, _ in FORMS]
    assert frame["types"].to_list() == [y for _, _, y in FORMS]
