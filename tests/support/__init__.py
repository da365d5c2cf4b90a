"""Shared test helpers (pytest plugins live here, conftest.py stays short)."""
