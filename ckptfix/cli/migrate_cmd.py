"""``ckptfix migrate``: move a checkpoint, change its state store provider.

One sub-command per module (relocate_cmd, provider_cmd); this module only groups them."""

from __future__ import annotations

import typer

from ckptfix.cli import provider_cmd, relocate_cmd

app = typer.Typer(
    help="Move a checkpoint to another path or store, or convert its state store provider.",
    no_args_is_help=True,
)
app.command("relocate")(relocate_cmd.relocate)
app.command("provider")(provider_cmd.provider)
