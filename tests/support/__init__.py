"""What the tests share besides fixtures: the golden vectors' location, the S3 server and
the clusters, hypothesis strategies, a format registered from outside recprep, and the
scripts some tests run as processes of their own (``kill_job.py``, ``fd_job.py``,
``cluster_job.py``, ``planted.py``, ``train_job.py``)."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).parent
DATA = SUPPORT.parent / "data"


def builtin_formats() -> list[str]:
    """The formats recprep registers itself: not ``outside-recordio``, which
    ``outside_format.py`` registers when imported (collecting its doctests does, before
    any test runs) and ``tests/test_format_contract.py`` removes when its tests end."""
    from recprep.containers import available_formats

    return [name for name in available_formats() if name != "outside-recordio"]


def random_records(n: int, size: int, seed: int = 0) -> list[bytes]:
    """``n`` records of ``size`` random bytes (the same for the same ``seed``)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [rng.bytes(size) for _ in range(n)]


def vector_records() -> list[bytes]:
    """The 44 records every file in tests/data/{go-recordio,pyrecordio-0.0.4,tfrecord} holds."""
    lines = (DATA / "go-recordio" / "records.hex").read_text().splitlines()
    return [bytes.fromhex(line.strip()) for line in lines]


def flip_byte(path: Path, where: float = 0.5, mask: int = 0xFF) -> None:
    """Damage the file at ``path`` in place: the byte at ``where`` of its length
    XOR-ed with ``mask`` (the same size, other bytes)."""
    raw = bytearray(path.read_bytes())
    raw[int(len(raw) * where)] ^= mask
    path.write_bytes(bytes(raw))
