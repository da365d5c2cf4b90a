"""ckptfix: read, audit and repair Spark Structured Streaming checkpoints without a JVM."""

__version__ = "0.1.0"
