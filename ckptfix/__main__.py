"""``python -m ckptfix``: the same as the ``ckptfix`` command."""

from ckptfix.cli.main import main

main()
