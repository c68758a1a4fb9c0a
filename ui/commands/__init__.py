"""The `mathscout` commands, one module each: `add(sub, common)` adds its parser (its `func` is the module's `run`),
`run(args)` carries it out. mathscout.ui.cli assembles the parser from COMMANDS and runs the one asked for."""
