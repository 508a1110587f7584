"""The one error type the ELMo core raises for bad input: its message is a single line naming the file and problem."""


class ElmoInputError(ValueError):
    """Bad user input (file, options, weights, text). The CLI prints ``error: <message>`` and exits 2."""
