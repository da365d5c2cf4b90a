"""SINK-BEHIND names the rollback that makes the batches the file sink lacks run again (repair hunt 10: W10, W18,
S04, D06 restarted on 4.3.0 with exactly the reference rows after `rollback --to-batch <sink's last> --sink OUT`;
the advice had been a restore only). A committed fixture (Spark 4.2.1's parquet file sink, batches 0..6) with its
sink log's newest entry deleted."""

from __future__ import annotations

import tarfile
from pathlib import Path

from ckptfix.audit import audit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_sink_behind_names_the_rollback_to_its_last_batch(tmp_path: Path) -> None:
    with tarfile.open(FIXTURES / "spark-4.2.1" / "filesink.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    ckpt, out = tmp_path / "ckpt", tmp_path / "output"
    log = out / "_spark_metadata"
    newest = max(int(p.name) for p in log.iterdir() if p.name.isdigit())
    (log / str(newest)).unlink()
    (log / f".{newest}.crc").unlink(missing_ok=True)
    (finding,) = [f for f in audit(str(ckpt), "4.3", sink_path=str(out)).findings if f.rule_id == "SINK-BEHIND"]
    want = f"`ckptfix rollback {ckpt} --to-batch {newest - 1} --sink {out} --with-sink`"
    assert want in (finding.fix or ""), finding.fix
