"""``recprep.spark`` asks its codec table, never a codec's name (issue 23).

What each codec's records are in Spark — which columns it writes, how rows are encoded,
how records become Arrow arrays, what a set's columns are — is one class per codec in
``recprep.spark.codecs.SPARK_CODECS``. No other module of the package compares a codec
name to a string literal (``codec == "raw"``, ``self.codec_name == "recprep"``,
``manifest.codec in ("example", ...)``): a codec's Spark behaviour is found in one place.
The check reads the source (no pyspark needed).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

#: the package's source, found from this file wherever the tests are grouped
SPARK = next(p / "src" / "recprep" / "spark" for p in Path(__file__).resolve().parents
             if (p / "src" / "recprep" / "spark").is_dir())
TABLE = "codecs.py"
CODEC_NAMES = frozenset({"raw", "recprep", "example"})
#: what a value holding a codec's name is called
CODEC_LIKE = re.compile(r"codec|record_?type", re.IGNORECASE)


def _holds_a_codec(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return bool(CODEC_LIKE.search(node.id))
    if isinstance(node, ast.Attribute):
        return bool(CODEC_LIKE.search(node.attr))
    return False


def _codec_literals(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and node.value in CODEC_NAMES:
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_codec_literals(e) for e in node.elts))
    return set()


def name_checks(source: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each comparison of a codec-like value with a codec name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_holds_a_codec(s) for s in sides) and any(_codec_literals(s) for s in sides):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_check_sees_a_branch_on_a_codec_name() -> None:
    assert name_checks('if codec == "raw":\n    pass') == [(1, "codec == 'raw'")]
    assert name_checks('x = "recprep" != self.codec_name')
    assert name_checks('ok = manifest.codec in ("example", "raw")')
    assert name_checks('ok = record_type == "example"')
    assert not name_checks('if column.type == "binary":\n    pass')
    assert not name_checks('if codec == other:\n    pass')


def test_only_the_codec_table_compares_codec_names() -> None:
    modules = sorted(p for p in SPARK.rglob("*.py") if p.name != TABLE)
    assert len(modules) > 5, "no modules found: wrong path?"
    found = [f"recprep/spark/{p.relative_to(SPARK)}:{line}: {code}"
             for p in modules for line, code in name_checks(p.read_text(encoding="utf-8"))]
    assert not found, (
        "these branch on a codec's name; ask recprep.spark.codecs (SPARK_CODECS) instead:\n"
        + "\n".join(found)
    )
