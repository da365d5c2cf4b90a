"""RocksDB block checksums without RocksDB (ckptfix/formats/sst.py), on SSTs that Spark 3.5.9-4.3 wrote (golden
fixtures) and on SSTs that the RocksDB library itself (through rocksdict) writes with every checksum type, index
encoding and compression Spark's RocksDBConf can ask for. Which byte belongs to which block comes from the footer,
read here by hand; the damage is a flipped byte, and what RocksDB does with it is recorded in tests/spark/damage.py
(rocksdb_sst_*_flipped_*)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from ckptfix.formats import sst
from tests.spark.damage import sst_footer_handles

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def spark_ssts() -> dict[str, bytes]:
    """Every SST in the golden fixtures, loose or inside the recorded bases' tarballs (3.5.9-4.3)."""
    out = {str(p.relative_to(FIXTURES)): p.read_bytes() for p in FIXTURES.rglob("*.sst")}
    for tarball in sorted(FIXTURES.glob("spark-*/*.tar.gz")):
        with tarfile.open(tarball) as tf:
            for m in tf.getmembers():
                if m.name.endswith(".sst"):
                    f = tf.extractfile(m)
                    assert f is not None
                    out[f"{tarball.relative_to(FIXTURES)}!{m.name}"] = f.read()
    return out


SPARK = spark_ssts()


def flipped(data: bytes, at: int) -> bytes:
    b = bytearray(data)
    b[at] ^= 0xFF
    return bytes(b)


def test_spark_written_ssts_verify_clean() -> None:
    assert len(SPARK) >= 20
    seen: set[str | None] = set()
    for name, data in SPARK.items():
        report = sst.verify(data)
        assert report.damage is None and not report.unverified, (name, report)
        assert report.format_version == 5, name  # RocksDBConf.formatVersion's default
        assert report.blocks_verified >= 4, name  # metaindex, properties, filter, index + data
        seen.add(report.checksum)
        if "spark-3.5.9" in name:
            assert report.checksum == "crc32c", name  # RocksDB 8.3 (Spark 3.5): CRC32C by default
    assert seen == {"crc32c", "xxh3"}  # and RocksDB 9 (Spark 4.x): XXH3


def test_every_flipped_byte_of_a_spark_sst_is_found_in_its_block() -> None:
    """Blocks tile the table up to its footer, in the order RocksDB's builder writes them (data, filter, index,
    properties, metaindex): every flipped byte is found, in the block that holds it."""
    name = min(n for n in SPARK if n.startswith("formats/rocksdb/"))
    data = SPARK[name]
    (meta_off, meta_size), (index_off, index_size) = sst_footer_handles(data)
    order = ["data", "filter", "index", "properties", "metaindex"]
    last: dict[str, int] = {}
    for at in range(len(data) - 53):
        damage = sst.verify(flipped(data, at)).damage
        assert damage is not None and damage.size is not None, (name, at)
        assert damage.offset <= at < damage.offset + damage.size + 5, (at, damage)  # 5: the block's trailer
        assert damage.fails_open is (damage.role not in ("data", "filter"))
        if last:
            assert order.index(damage.role) >= order.index(list(last)[-1]), (at, damage)
        last[damage.role] = at
    assert list(last) == order, last
    assert last["index"] == index_off + index_size + 4 and last["metaindex"] == meta_off + meta_size + 4


def test_a_flipped_format_version_or_magic_is_footer_damage() -> None:
    data = next(iter(SPARK.values()))
    for at in (len(data) - 1, len(data) - 8, len(data) - 12 + 3):
        report = sst.verify(flipped(data, at))
        assert report.damage is not None and report.damage.role == "footer", (at, report)
    short = sst.verify(data[:40])
    assert short.damage is not None and short.damage.role == "footer" and "40 bytes" in short.damage.found


rocksdict = pytest.importorskip("rocksdict")


def write_sst(
    path: Path,
    *,
    checksum: str = "xxh3",
    compression: str = "lz4",
    format_version: int = 5,
    index_restart: int = 1,
    index_type: str = "binary_search",
    keys: int = 20_000,
) -> bytes:
    opts = rocksdict.Options()
    table = rocksdict.BlockBasedOptions()
    table.set_block_size(1024)
    table.set_format_version(format_version)
    table.set_checksum_type(getattr(rocksdict.ChecksumType, checksum)())
    table.set_index_block_restart_interval(index_restart)
    table.set_index_type(getattr(rocksdict.BlockBasedIndexType, index_type)())
    # no bloom filter: the index block then follows the last data block (index offset - 6 is that block's last byte)
    opts.set_block_based_table_factory(table)
    opts.set_compression_type(getattr(rocksdict.DBCompressionType, compression)())
    writer = rocksdict.SstFileWriter(options=opts)
    writer.open(str(path))
    for i in range(keys):
        writer[f"key-{i:08d}".encode()] = (f"value-{i}-" * 5).encode()
    writer.finish()
    return path.read_bytes()


@pytest.mark.parametrize("checksum", ["crc32c", "xxhash", "xxhash64", "xxh3"])
@pytest.mark.parametrize("compression", ["none", "lz4", "zstd", "snappy", "zlib"])
def test_rocksdb_written_tables_with_every_checksum_and_compression(
    tmp_path: Path, checksum: str, compression: str
) -> None:
    data = write_sst(tmp_path / "t.sst", checksum=checksum, compression=compression)
    report = sst.verify(data)
    assert report.damage is None and not report.unverified, report
    assert report.checksum == checksum
    assert report.blocks_verified > 100  # 20k keys in 1 KiB blocks
    _meta, (index_off, _size) = sst_footer_handles(data)
    for at in (0, index_off // 2, index_off - 6):  # first, a middle and the last data block
        bad = sst.verify(flipped(data, at)).damage
        assert bad is not None and bad.role == "data", (at, bad)


@pytest.mark.parametrize("format_version", [2, 3, 4, 5])
@pytest.mark.parametrize("index_restart", [1, 16])
def test_index_encodings_of_every_format_version(tmp_path: Path, format_version: int, index_restart: int) -> None:
    """Format 4+ delta-encode index values: between restart points an entry holds only its size difference."""
    data = write_sst(tmp_path / "t.sst", format_version=format_version, index_restart=index_restart)
    report = sst.verify(data)
    assert report.damage is None and not report.unverified, report
    assert report.format_version == format_version
    _meta, (index_off, _size) = sst_footer_handles(data)
    # a byte in the last data block is found only if every handle the index lists was decoded right
    bad = sst.verify(flipped(data, index_off - 6)).damage
    assert bad is not None and bad.role == "data"


def test_what_cannot_be_walked_is_said_not_passed(tmp_path: Path) -> None:
    partitioned = sst.verify(write_sst(tmp_path / "p.sst", index_type="two_level_index_search"))
    assert partitioned.damage is None and "partitioned index" in partitioned.unverified
    v6 = sst.verify(write_sst(tmp_path / "v6.sst", format_version=6))
    assert v6.damage is None and "format_version 6" in v6.unverified
    none = sst.verify(write_sst(tmp_path / "n.sst", checksum="no_checksum"))
    assert none.damage is None and "no block checksums" in none.unverified


def test_a_table_of_unknown_bytes_is_footer_damage() -> None:
    report = sst.verify(io.BytesIO(b"\x00" * 4096).getvalue())
    assert report.damage is not None and report.damage.role == "footer"


def test_a_damaged_block_yields_no_entries() -> None:
    """The few entries the audit samples (where keys are placed, whether rows fit the stored schema) come only from
    blocks whose checksum matches: repair hunt 13 found a flipped byte in a Spark SST's first data block decoded
    as rows that "do not fit the stored schema" (STATE-SCHEMA-ROWS, sending the user after a schema backup)."""
    checked = 0
    for name, data in SPARK.items():
        entries = sst.first_entries(data)
        if not entries:
            continue
        assert sst.first_entries(flipped(data, 20)) == [], name  # inside the first data block (it starts at 0)
        checked += 1
    assert checked >= 10


def test_a_corrupt_data_block_is_not_read_as_rows_of_another_schema(tmp_path: Path) -> None:
    """The recorded catalogue case (Spark 3.5.9-4.3 wrote the base): the audit reports the SST, not the schema."""
    from tests.audit.test_restart_prediction import _recorded, run_audit

    for version in ("3.5.9", "4.3.0"):
        case, target, _, ckpt, output = _recorded(
            version, "rocksdb_sst_data_flipped_no_crc_no_changelog", tmp_path / version
        )
        rules = {f.rule_id for f in run_audit(ckpt, target, output, case).findings}
        assert "STATE-SST-CORRUPT" in rules and "STATE-SCHEMA-ROWS" not in rules, rules
