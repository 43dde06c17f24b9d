from cogbias.cli.main import main

raise SystemExit(main())
