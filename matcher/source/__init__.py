"""Where log bytes come from: files (discovery, identity, tailing across rotation), checkpoints,
stdin and the systemd journal. Everything that touches the filesystem or a subprocess for input
lives here; the rest of the pipeline sees `Chunk`s and `Line`s only.
"""
