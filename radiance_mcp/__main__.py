from radiance_mcp.app.cli import main

raise SystemExit(main())
