from radiance_mcp.cli import main

raise SystemExit(main())
