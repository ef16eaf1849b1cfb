"""``python -m cli``: the same as the ``kb-agent`` command."""

from cli.app import main

main()
