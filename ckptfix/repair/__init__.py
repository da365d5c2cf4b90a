"""Repairs as data: a plan of file actions with preconditions, applied with backups and a
journal, undone byte for byte."""
