"""With state/ absent and no watermark in the logs, nothing in the checkpoint tells a stateless query from a stateful
one whose state/ was deleted. Spark fails on the second (damage case ``state_dir_missing``, recorded on 3.5.9-4.2.1
and run live on 4.3; damage hunt 7, F1: a groupBy count, a transformWithStateInPandas query). The verdict's
"will restart" then says what it assumes, in the headline and in JSON; --stateful / --stateless decide."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

from ckptfix.audit import audit
from ckptfix.render import jsonout

SPARK35 = Path(__file__).resolve().parents[1] / "fixtures" / "spark-3.5.9"


def _extract(name: str, dest: Path) -> Path:
    with tarfile.open(SPARK35 / f"{name}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest / "ckpt"


def test_a_deleted_state_dir_is_an_assumption_the_headline_names(tmp_path: Path) -> None:
    ckpt = _extract("agg_hdfs", tmp_path)
    shutil.rmtree(ckpt / "state")
    report = audit(str(ckpt), "4.3")
    assert report.verdict.restarts is True
    assert report.verdict.headline.startswith(
        "Spark 4.3 will restart this checkpoint (assuming its query is stateless: state/ is absent;"
    ), report.verdict.headline
    doc = json.loads(jsonout.report(report))
    assert doc["verdict"]["assumptions"] and "stateless" in doc["verdict"]["assumptions"][0]
    told = audit(str(ckpt), "4.3", stateful=True).verdict
    assert told.restarts is False and told.blocking_rule == "STATE-DIR-MISSING"
    assert audit(str(ckpt), "4.3", stateful=False).verdict.headline == "Spark 4.3 will restart this checkpoint"


def test_a_checkpoint_with_state_assumes_nothing(tmp_path: Path) -> None:
    report = audit(str(_extract("agg_hdfs", tmp_path)), "4.3")
    assert report.verdict.assumptions == () and "assuming" not in report.verdict.headline
