"""Migrations: move a checkpoint (relocate), convert its state store provider (provider)."""
