from matcher.cli import main

raise SystemExit(main())
