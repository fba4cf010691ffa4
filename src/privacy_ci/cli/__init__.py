"""The command-line face of privacy-ci: one module per command group."""
