"""One-line input errors shared by the task readers (file, line or key, what was expected, what was found), and the
one way they open text files: a path is checked (missing, a directory), a UTF-8 byte-order mark is dropped, and a
byte that is not UTF-8 is reported with its file and line instead of a bare ``UnicodeDecodeError`` at a "position"
of some internal buffer.

``InputError`` is what ``tasks.error_report`` prints as one line instead of a traceback (see its docstring).
"""
import codecs
from pathlib import Path
from typing import Iterator, Tuple

from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path


class InputError(ConfigurationError):
    """Bad task data: a one-line message naming the file and line (or key)."""


def input_error(file_path, where, expected: str, found) -> InputError:
    """``where``: a line number, or a key path for JSON documents."""
    location = f"line {where}" if isinstance(where, int) else where
    found_text = found if isinstance(found, str) and len(found) <= 80 else repr(found)[:80]
    return InputError(f"{file_path}: {location}: expected {expected}, found {found_text}")


def empty_file_error(file_path, expected: str) -> InputError:
    return InputError(f"{file_path}: expected {expected}, found none (empty file)")


def local_file(file_path, expected: str) -> str:
    """The local file ``file_path`` names (a URL or archive path is fetched by allennlp's ``cached_path``), or a
    one-line error for a path that does not exist or is a directory."""
    if "://" in str(file_path) or "!" in str(file_path):
        return cached_path(file_path)
    path = Path(file_path)
    if path.is_dir():
        raise InputError(f"{file_path}: expected a file of {expected}, found a directory")
    if not path.is_file():
        raise InputError(f"{file_path}: expected a file of {expected}, found no such file")
    return str(path)


def utf8_error(file_path, line_number: int, raw: bytes, error: UnicodeDecodeError) -> InputError:
    return InputError(f"{file_path}: line {line_number}: expected UTF-8 text, found byte 0x{raw[error.start]:02x} "
                      f"at column {error.start + 1} (convert the file to UTF-8, e.g. with iconv)")


def decode_line(file_path, line_number: int, raw: bytes) -> str:
    """One line of a file as text; a byte-order mark at the start of the file (line 1) is dropped."""
    if line_number == 1 and raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise utf8_error(file_path, line_number, raw, error) from None


def text_lines(file_path, expected: str) -> Iterator[Tuple[int, str]]:
    r"""(line number from 1, line ending in '\n' but the last) of a UTF-8 text file, checked as above; ``expected``
    names what the file should hold, for the error when the path is missing or a directory. A line ends at \n,
    \r\n or \r, as allennlp's readers read text files (universal newlines): a CR-only file is not one line."""
    line_number = 0
    with open(local_file(file_path, expected), "rb") as data_file:
        for chunk in data_file:
            ends = chunk.endswith(b"\n")
            body = chunk[:-1] if ends else chunk
            if ends and body.endswith(b"\r"):
                body = body[:-1]
            pieces = body.split(b"\r")
            for i, raw in enumerate(pieces):
                last = i == len(pieces) - 1
                if last and not ends and not raw and len(pieces) > 1:
                    break  # the file ended with a \r: that was the last line's end
                line_number += 1
                yield line_number, decode_line(file_path, line_number, raw + (b"\n" if ends or not last else b""))


def json_error(file_path, where, expected: str, error: ValueError, text: str) -> InputError:
    """A json.JSONDecodeError with its column; a text that ends inside a value is said to be cut short (a broken
    download), not left as "Unterminated string starting at" (json's message, whose position was left out)."""
    what = error.msg.removesuffix(" at")
    if error.msg.startswith("Unterminated string") or error.pos >= len(text.rstrip()):
        found = "text cut short inside a JSON value (a broken download? get the file again)"
    else:
        found = f"invalid JSON ({what} at column {error.colno})"
    location = f"line {where}" if isinstance(where, int) else where
    return InputError(f"{file_path}: {location}: expected {expected}, found {found}")


def read_text(file_path, expected: str) -> str:
    """A whole UTF-8 text file (JSON documents), checked as above."""
    return "".join(line for _, line in text_lines(file_path, expected))
