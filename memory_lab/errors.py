"""The errors every stage may raise: here, below them all, so a memory can refuse a setting
without importing the run's configuration."""


class ConfigError(ValueError):
    """A setting that cannot be used, named by its option."""
