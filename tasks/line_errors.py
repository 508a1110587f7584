"""One-line input errors shared by the task readers: file, line (or key), what was expected, what was found."""
from allennlp.common.checks import ConfigurationError


def input_error(file_path, where, expected: str, found) -> ConfigurationError:
    """``where``: a line number, or a key path for JSON documents."""
    location = f"line {where}" if isinstance(where, int) else where
    found_text = found if isinstance(found, str) and len(found) <= 80 else repr(found)[:80]
    return ConfigurationError(f"{file_path}: {location}: expected {expected}, found {found_text}")


def empty_file_error(file_path, expected: str) -> ConfigurationError:
    return ConfigurationError(f"{file_path}: expected {expected}, found none (empty file)")
