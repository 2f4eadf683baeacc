"""`pulsar-admin`, a pure HTTP client of the admin REST API (imports nothing from the
service packages; Java formats come from `javaformats`). Entry point: `cli.main:run`.

    main.py, version.py            the console script; `--version`
    app.py, framework.py           the Typer app; how a command's result reaches stdout
    fastpath.py, reads.py          the common reads without Typer; their bodies
    commands/                      one module per `pulsar-admin` group
    context.py, clickcompat.py     the object every command receives; the click Typer runs on
    client.py, config.py, auth.py  HTTP client, client.conf, auth headers
    watch.py, client_tool.py       `bookies watch` (SSE); `pulsar-client produce`
    output.py, javafmt.py          stdout in the Java tool's format (and json/yaml/table)
    errors.py                      stderr text and exit codes
"""

__all__: list[str] = []
