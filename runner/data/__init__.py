"""The profiles' data from its public origins: download, convert, verify (python -m runner.data)."""
