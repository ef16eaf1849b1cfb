"""The ``kb-agent`` command line: ingest, ask, chat, eval, threads, memories, tools (``cli.app``)."""
