from simcse_weince.diagnostics.cli import main

raise SystemExit(main())
