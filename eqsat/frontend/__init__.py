"""From the user's definition to the IR: the recorder (``recorder``: nvFuser's
``FusionDefinition`` protocol), and ingestion of functions, files and live nvFuser definitions
(``ingest``, ``reader``: the AST reader that runs no code)."""
