"""The tool platform: registry, validation, execution policy and built-in tools."""
