from matcher.cli import run

raise SystemExit(run())
