"""The fuzz and fault battery (issue 16): parsers, read commands, crashes, S3 faults and load, from one command:
``python -m bench.battery`` (``--quick`` for a sample). See bench/README.md."""
