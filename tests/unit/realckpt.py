"""Where the real, Spark-written sample checkpoint lives (shipped in the repo)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sample_checkpoint() -> Path:
    return ROOT / "samples" / "async-sparse"
