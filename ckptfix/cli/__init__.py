"""The ``ckptfix`` command line: thin typer commands, one module per command group."""
